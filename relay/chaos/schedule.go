package chaos

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Kind is a kind of fault.
type Kind string

// The faults a schedule draws from.
const (
	ReplicaKill     Kind = "replica-kill"     // kill -9 of a relay replica, restarted after For
	ReplicaDrain    Kind = "replica-drain"    // SIGTERM (drain) of a replica, restarted after For
	PGRestart       Kind = "pg-restart"       // PostgreSQL restarted (pg_ctl restart -m fast)
	PGBlackhole     Kind = "pg-blackhole"     // the relays' link to PostgreSQL passes nothing for For (no FIN)
	AgentKill       Kind = "agent-kill"       // kill -9 of an agent, restarted after For; messages are queued to it meanwhile
	TunnelBlackhole Kind = "tunnel-blackhole" // an agent's link to the balancer passes nothing for For (no FIN)
	Latency         Kind = "latency"          // latency and jitter on the clients' link or an agent's
	Bandwidth       Kind = "bandwidth"        // an agent's link limited to a few KB/s
	Slicer          Kind = "slicer"           // an agent's link cuts data into small, delayed pieces
	ClientStall     Kind = "client-stall"     // a client stops reading its event stream for For
	ResetPeer       Kind = "reset-peer"       // an agent's link is reset (TCP RST) after a while: a lost connection
)

// Kinds lists every kind, in the order reports show them.
var Kinds = []Kind{ReplicaKill, ReplicaDrain, PGRestart, PGBlackhole, AgentKill, TunnelBlackhole, Latency, Bandwidth, Slicer, ResetPeer, ClientStall}

// Fault is one fault of a schedule.
type Fault struct {
	At     time.Duration // since the load started
	Kind   Kind
	Target int           // replica, agent or client index (unused for PostgreSQL)
	For    time.Duration // how long it lasts (0: instantaneous)
}

// End is when the fault is over.
func (f Fault) End() time.Duration { return f.At + f.For }

func (f Fault) String() string {
	return fmt.Sprintf("%7.2fs %-16s target=%-3d for=%s", f.At.Seconds(), f.Kind, f.Target, f.For.Round(time.Millisecond))
}

// Plan says what a schedule may hit.
type Plan struct {
	Seed     uint64
	Duration time.Duration // faults start within it
	Replicas int
	Agents   int
	Clients  int
}

// Schedule draws a reproducible fault schedule from p.Seed: a fault every
// 2-5 s, overlapping, each kind in turn at least once when the duration
// allows, then at random. Replica faults never overlap one another (two of
// three replicas are always up or coming back), so every fault is one the
// relay claims to survive.
func Schedule(p Plan) []Fault {
	r := rand.New(rand.NewPCG(p.Seed, p.Seed^0x9e3779b97f4a7c15))
	dur := func(lo, hi time.Duration) time.Duration {
		return lo + time.Duration(r.Int64N(int64(hi-lo)+1))
	}
	// The first faults cover every kind, in an order of the seed.
	order := slices.Clone(Kinds)
	r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	var out []Fault
	var replicaFree time.Duration // when the last replica fault is over
	at := dur(2*time.Second, 4*time.Second)
	for i := 0; at < p.Duration; i++ {
		k := Kinds[r.IntN(len(Kinds))]
		if i < len(order) {
			k = order[i]
		}
		f := Fault{At: at, Kind: k}
		switch k {
		case ReplicaKill, ReplicaDrain:
			if at < replicaFree {
				f.At = replicaFree + dur(500*time.Millisecond, 2*time.Second)
			}
			f.Target = r.IntN(p.Replicas)
			f.For = dur(3*time.Second, 8*time.Second)
			// Down for For, then up and taking tunnels back for a while.
			replicaFree = f.At + f.For + 5*time.Second
		case PGRestart:
		case PGBlackhole:
			f.For = dur(2*time.Second, 6*time.Second)
		case AgentKill:
			f.Target = r.IntN(p.Agents)
			f.For = dur(3*time.Second, 8*time.Second)
		case TunnelBlackhole:
			f.Target = r.IntN(p.Agents)
			f.For = dur(5*time.Second, 15*time.Second)
		case Latency:
			f.Target = r.IntN(p.Agents + 1) // Agents: the clients' link
			f.For = dur(3*time.Second, 10*time.Second)
		case Bandwidth, Slicer, ResetPeer:
			f.Target = r.IntN(p.Agents)
			f.For = dur(3*time.Second, 10*time.Second)
		case ClientStall:
			f.Target = r.IntN(p.Clients)
			f.For = dur(2*time.Second, 8*time.Second)
		}
		if f.At < p.Duration {
			out = append(out, f)
		}
		at += dur(2*time.Second, 5*time.Second)
	}
	slices.SortStableFunc(out, func(a, b Fault) int { return int(a.At - b.At) })
	return out
}

// Format is the schedule as lines, with the seed that reproduces it.
func Format(seed uint64, fs []Fault) string {
	var b strings.Builder
	fmt.Fprintf(&b, "fault schedule of seed %d (CHAOS_SEED=%d reproduces it):\n", seed, seed)
	for _, f := range fs {
		b.WriteString("  " + f.String() + "\n")
	}
	return b.String()
}
