package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/betcode-dev/betcode/relay/store/internal/rules"
)

// writer commits one groupcommit queue's batches. It sends each batch on a
// pool connection in pipeline mode, as the prepared enqueueSQL followed by
// a Sync, so each batch is its own implicit transaction. The queue sends
// the next batch before it waits for the previous one (Options.Depth); the
// server runs them in order. A batch's outcome is known, and its callers
// released, only once its Sync's ReadyForQuery arrives, which the server
// sends after the commit is durable.
//
// The connection goes back to the pool whenever no batch is in flight, so
// the pool checks it (pgxpool pings a connection that was idle) before the
// next batch, as it does for any query: a batch is not lost to a
// connection that died while idle.
//
// Only the queue's one writer goroutine uses a writer.
type writer struct {
	s      *Store
	cur    *pipeConn // where the next batch goes; nil if none is in flight
	buf    []byte    // the parameters of the batch being sent, kept for the next
	params [][]byte  // slices of buf
}

// pipeConn is a connection in pipeline mode.
type pipeConn struct {
	conn    *pgxpool.Conn
	pipe    *pgconn.Pipeline
	sd      *pgconn.StatementDescription
	formats []int16 // result formats of enqueueSQL
	flights int     // batches sent and not yet received
}

// send is the queue's groupcommit.SendFunc.
func (w *writer) send(ctx context.Context, batch []*batchRequest) func() {
	items := make([]rules.Item, len(batch))
	for i, r := range batch {
		items[i] = r.In
	}
	c := newEnqueueCall(items, w.s.opt.Now())
	pc, err := w.conn(ctx)
	if err == nil {
		err = w.encode(pc, c.args)
		if err == nil {
			pc.pipe.SendQueryStatement(pc.sd, w.params, binary, pc.formats)
			pc.pipe.SendPipelineSync()
			err = pc.pipe.Flush()
		}
		pc.flights++ // released by done below
	}
	if err != nil {
		err = fmt.Errorf("store %d messages: %w", len(c.sent), err)
		if pc != nil {
			w.done(pc)
		}
		return func() { w.s.finish(ctx, batch, items, nil, err) }
	}
	return func() {
		outs, err := pc.receive(c)
		w.done(pc)
		w.s.finish(ctx, batch, items, outs, err)
	}
}

// binary is the parameter format codes for all-binary parameters.
var binary = []int16{pgtype.BinaryFormatCode}

// encode encodes args, the parameters of pc's statement, in binary into
// w.buf and points w.params at them. Reusing w.buf spares the garbage of
// growing a new buffer for each batch.
func (w *writer) encode(pc *pipeConn, args []any) error {
	w.buf, w.params = w.buf[:0], w.params[:0]
	ends := make([]int, len(args))
	for i, arg := range args {
		buf, err := pc.conn.Conn().TypeMap().Encode(pc.sd.ParamOIDs[i], pgtype.BinaryFormatCode, arg, w.buf)
		if err != nil {
			return fmt.Errorf("encode parameter %d: %w", i+1, err)
		}
		w.buf, ends[i] = buf, len(buf)
	}
	start := 0
	for _, end := range ends {
		w.params = append(w.params, w.buf[start:end:end])
		start = end
	}
	return nil
}

// conn returns the connection for the next batch, acquiring one if no
// batch is in flight.
func (w *writer) conn(ctx context.Context) (*pipeConn, error) {
	if w.cur != nil && !w.cur.conn.Conn().IsClosed() {
		return w.cur, nil
	}
	w.cur = nil // closed: later batches go to a new connection
	conn, err := w.s.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	sd, err := conn.Conn().Prepare(ctx, enqueueStatement, enqueueSQL)
	if err != nil {
		conn.Release()
		return nil, err
	}
	formats := make([]int16, len(sd.Fields))
	for i, f := range sd.Fields {
		formats[i] = conn.Conn().TypeMap().FormatCodeForOID(f.DataTypeOID)
	}
	w.cur = &pipeConn{conn: conn, pipe: conn.Conn().PgConn().StartPipeline(ctx), sd: sd, formats: formats}
	return w.cur, nil
}

// done ends a batch's flight on pc and returns pc's connection to the pool
// when it was the last one; the pool closes it if it failed.
func (w *writer) done(pc *pipeConn) {
	pc.flights--
	if pc.flights > 0 {
		return
	}
	if w.cur == pc {
		w.cur = nil
	}
	if err := pc.pipe.Close(); err != nil && !pc.conn.Conn().IsClosed() {
		w.s.opt.Logger.Warn("postgres store: leaving pipeline mode", "err", err)
	}
	pc.conn.Release()
}

// receive reads the outcome of the oldest batch sent on pc, whose call is
// c: the query's rows, then the Sync's ReadyForQuery, which says that the
// transaction committed. After an error other than the server's
// (*pgconn.PgError) the connection is closed, as the replies of the
// batches behind may not line up any more.
func (pc *pipeConn) receive(c *enqueueCall) (outs []result, err error) {
	defer func() {
		if err != nil && !isPgError(err) {
			_ = pc.conn.Conn().PgConn().Close(context.Background())
		}
	}()
	res, err := pc.pipe.GetResults()
	switch res := res.(type) {
	case *pgconn.ResultReader:
		outs, err = c.scan(pgx.RowsFromResultReader(pc.conn.Conn().TypeMap(), res))
	case nil:
		if err == nil {
			err = errors.New("pipeline: no result for a sent batch")
		}
		if !isPgError(err) {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("pipeline: unexpected %T for a batch", res)
	}
	for {
		res, serr := pc.pipe.GetResults()
		if _, ok := res.(*pgconn.PipelineSync); ok {
			return outs, err
		}
		if serr == nil {
			serr = fmt.Errorf("pipeline: unexpected %T instead of the batch's Sync", res)
		}
		if !isPgError(serr) {
			return nil, serr
		}
		// An error at the Sync (the commit failed): its ReadyForQuery
		// follows.
		err = serr
	}
}

func isPgError(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr)
}
