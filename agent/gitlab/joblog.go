package gitlab

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	gl "gitlab.com/gitlab-org/api/client-go"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// DefaultLogChunk is the most log bytes one GetJobLog answer carries (well
// under gRPC's 4 MiB message limit); a longer log comes in chunks.
const DefaultLogChunk = 1 << 20

// GetJobLog returns a chunk of a job's log: from offset, or the last
// tail_lines lines, at most the chunk size (Options.LogChunk). next_offset
// continues; total_bytes is the log's size, so next_offset < total_bytes
// means more is to come.
func (s *Service) GetJobLog(ctx context.Context, req *pb.GetJobLogRequest) (*pb.GetJobLogResponse, error) {
	return call(ctx, s, req, func(p string) string { return fmt.Sprintf("job %d of %s", req.GetJobId(), p) }, func(ctx context.Context, project string) (*pb.GetJobLogResponse, error) {
		if req.GetJobId() == 0 {
			return nil, fmt.Errorf("%w: name the job (job_id)", errNoProject)
		}
		// The status first: a job finished before its log is read has
		// its whole log in it.
		job, _, err := s.client.Jobs.GetJob(project, int64(req.GetJobId()), gl.WithContext(ctx))
		if err != nil {
			return nil, err
		}
		r, _, err := s.client.Jobs.GetTraceFile(project, int64(req.GetJobId()), gl.WithContext(ctx))
		if err != nil {
			return nil, err
		}
		log, err := io.ReadAll(r)
		if err != nil {
			return nil, fmt.Errorf("read the log: %w", err)
		}
		start, end := logWindow(log, req.GetOffset(), req.GetTailLines(), s.opts.LogChunk)
		return &pb.GetJobLogResponse{
			Content:    strings.ToValidUTF8(string(log[start:end]), "\uFFFD"),
			NextOffset: uint64(end),
			Complete:   finished(job.Status) && end == len(log),
			TotalBytes: uint64(len(log)),
		}, nil
	})
}

// logWindow picks the bytes [start, end) of log to send: from offset (or
// the start of the last tail lines after it), at most chunk bytes, ending
// after a newline or, failing that, on a rune boundary.
func logWindow(log []byte, offset uint64, tail uint32, chunk int) (start, end int) {
	start = int(min(offset, uint64(len(log))))
	end = len(log)
	if tail > 0 {
		from := end
		for n := uint32(0); from > start; {
			i := bytes.LastIndexByte(log[start:from-1], '\n')
			if i < 0 {
				from = start
				break
			}
			// Count a line only when it is not the unterminated last one.
			from = start + i + 1
			if n++; n == tail {
				break
			}
		}
		start = from
		if end-start > chunk {
			// The last lines alone are more than a chunk: send the end,
			// starting at a line.
			start = end - chunk
			if i := bytes.IndexByte(log[start:end], '\n'); i >= 0 && i < end-start-1 {
				start += i + 1
			}
		}
		return start, end
	}
	if end-start <= chunk {
		return start, end
	}
	end = start + chunk
	if i := bytes.LastIndexByte(log[start:end], '\n'); i >= chunk/2 {
		return start, start + i + 1
	}
	for end > start && !utf8.RuneStart(log[end]) {
		end--
	}
	if end == start {
		end = start + chunk
	}
	return start, end
}
