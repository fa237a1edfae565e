package fakegitlab

import (
	"cmp"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Handlers run with s.mu held (see middleware).

func (s *Server) listMergeRequests(w http.ResponseWriter, r *http.Request) {
	p := s.project(w, r)
	if p == nil {
		return
	}
	q := r.URL.Query()
	var out []MergeRequest
	for _, mr := range p.MergeRequests {
		if st := q.Get("state"); st != "" && st != "all" && mr.State != st {
			continue
		}
		if a := q.Get("author_username"); a != "" && mr.Author.Username != a {
			continue
		}
		mr.HeadPipeline = nil
		out = append(out, mr)
	}
	sortBy(out, q, func(m MergeRequest) (int64, time.Time, time.Time) { return m.ID, m.CreatedAt, m.UpdatedAt })
	writePage(w, r, out)
}

func (s *Server) getMergeRequest(w http.ResponseWriter, r *http.Request) {
	p := s.project(w, r)
	if p == nil {
		return
	}
	iid := pathInt(r, "iid")
	for _, mr := range p.MergeRequests {
		if mr.IID == iid {
			writeJSON(w, http.StatusOK, mr)
			return
		}
	}
	notFound(w, "")
}

func (s *Server) listPipelines(w http.ResponseWriter, r *http.Request) {
	p := s.project(w, r)
	if p == nil {
		return
	}
	q := r.URL.Query()
	var out []Pipeline
	for _, pl := range p.Pipelines {
		if ref := q.Get("ref"); ref != "" && pl.Ref != ref {
			continue
		}
		if st := q.Get("status"); st != "" && pl.Status != st {
			continue
		}
		pl.Duration = nil
		out = append(out, pl)
	}
	sortBy(out, q, func(p Pipeline) (int64, time.Time, time.Time) { return p.ID, p.CreatedAt, p.UpdatedAt })
	writePage(w, r, out)
}

func (s *Server) listJobs(w http.ResponseWriter, r *http.Request) {
	p := s.project(w, r)
	if p == nil {
		return
	}
	pid := pathInt(r, "pid")
	if !slices.ContainsFunc(p.Pipelines, func(pl Pipeline) bool { return pl.ID == pid }) {
		notFound(w, "")
		return
	}
	var out []Job
	for _, j := range p.Jobs {
		if j.Pipeline.ID == pid {
			out = append(out, j)
		}
	}
	// GitLab lists a pipeline's jobs newest first.
	slices.SortFunc(out, func(a, b Job) int { return cmp.Compare(b.ID, a.ID) })
	writePage(w, r, out)
}

// job finds the request's job, or answers 404.
func (s *Server) job(w http.ResponseWriter, r *http.Request) *Job {
	p := s.project(w, r)
	if p == nil {
		return nil
	}
	id := pathInt(r, "jid")
	for i := range p.Jobs {
		if p.Jobs[i].ID == id {
			return &p.Jobs[i]
		}
	}
	notFound(w, "")
	return nil
}

func (s *Server) getJob(w http.ResponseWriter, r *http.Request) {
	if j := s.job(w, r); j != nil {
		writeJSON(w, http.StatusOK, j)
	}
}

func (s *Server) getTrace(w http.ResponseWriter, r *http.Request) {
	if j := s.job(w, r); j != nil {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Content-Length", strconv.Itoa(len(j.Trace)))
		fmt.Fprint(w, j.Trace)
	}
}

func (s *Server) listIssues(w http.ResponseWriter, r *http.Request) {
	p := s.project(w, r)
	if p == nil {
		return
	}
	q := r.URL.Query()
	var labels []string
	if l := q.Get("labels"); l != "" {
		labels = strings.Split(l, ",")
	}
	var out []Issue
	for _, is := range p.Issues {
		if st := q.Get("state"); st != "" && st != "all" && is.State != st {
			continue
		}
		if a := q.Get("assignee_username"); a != "" && !slices.ContainsFunc(is.Assignees, func(u User) bool { return u.Username == a }) {
			continue
		}
		if slices.ContainsFunc(labels, func(l string) bool { return !slices.Contains(is.Labels, l) }) {
			continue
		}
		out = append(out, is)
	}
	sortBy(out, q, func(i Issue) (int64, time.Time, time.Time) { return i.ID, i.CreatedAt, i.UpdatedAt })
	writePage(w, r, out)
}

// sortBy orders items by order_by (id, created_at (default), updated_at) and
// sort (desc (default), asc).
func sortBy[T any](items []T, q url.Values, key func(T) (int64, time.Time, time.Time)) {
	slices.SortStableFunc(items, func(a, b T) int {
		ia, ca, ua := key(a)
		ib, cb, ub := key(b)
		var c int
		switch q.Get("order_by") {
		case "id":
			c = cmp.Compare(ia, ib)
		case "updated_at":
			c = ua.Compare(ub)
		default:
			c = ca.Compare(cb)
		}
		if c == 0 {
			c = cmp.Compare(ia, ib)
		}
		if q.Get("sort") != "asc" {
			c = -c
		}
		return c
	})
}

// writePage answers one page of items with GitLab's pagination headers.
func writePage[T any](w http.ResponseWriter, r *http.Request, items []T) {
	q := r.URL.Query()
	page, _ := strconv.Atoi(q.Get("page"))
	page = max(page, 1)
	per, err := strconv.Atoi(q.Get("per_page"))
	if err != nil || per <= 0 {
		per = 20
	}
	per = min(per, 100)
	total := len(items)
	pages := max((total+per-1)/per, 1)
	from := min((page-1)*per, total)
	to := min(from+per, total)
	h := w.Header()
	h.Set("X-Page", strconv.Itoa(page))
	h.Set("X-Per-Page", strconv.Itoa(per))
	h.Set("X-Total", strconv.Itoa(total))
	h.Set("X-Total-Pages", strconv.Itoa(pages))
	h.Set("X-Next-Page", "")
	h.Set("X-Prev-Page", "")
	link := func(p int, rel string) string {
		u := *r.URL
		u.Scheme, u.Host = "http", r.Host
		v := u.Query()
		v.Set("page", strconv.Itoa(p))
		v.Set("per_page", strconv.Itoa(per))
		u.RawQuery = v.Encode()
		return fmt.Sprintf("<%s>; rel=%q", u.String(), rel)
	}
	var links []string
	if page < pages {
		h.Set("X-Next-Page", strconv.Itoa(page+1))
		links = append(links, link(page+1, "next"))
	}
	if page > 1 {
		h.Set("X-Prev-Page", strconv.Itoa(page-1))
		links = append(links, link(page-1, "prev"))
	}
	links = append(links, link(1, "first"), link(pages, "last"))
	h.Set("Link", strings.Join(links, ", "))
	out := items[from:to]
	if out == nil {
		out = []T{}
	}
	writeJSON(w, http.StatusOK, out)
}
