package workspace

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"google.golang.org/grpc/codes"

	"github.com/betcode-dev/betcode/agent/server"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// ListDirectories lists the subdirectories of a directory, sorted by name:
// symlinks to directories count as directories; entries the agent cannot
// stat or enter are left out, and so are dot-names unless include_hidden.
func (s *Service) ListDirectories(_ context.Context, req *pb.ListDirectoriesRequest) (*pb.ListDirectoriesResponse, error) {
	dir, err := s.expand(req.Path)
	if err != nil {
		return nil, server.Status(codes.InvalidArgument, server.CodeInvalidArgument, "path "+quote(req.Path)+": "+err.Error())
	}
	if err := dirError(dir); err != nil {
		return nil, err
	}
	// os.ReadDir sorts by name and gives each entry's type from the
	// directory itself, so only symlinks and kept directories cost a stat.
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrPermission) {
		return nil, server.Status(codes.PermissionDenied, server.CodeDirectoryNotReadable, dir+" is not readable")
	}
	if err != nil && len(ents) == 0 {
		return nil, s.internal("read "+dir, err)
	}
	resp := &pb.ListDirectoriesResponse{Path: validUTF8(dir)}
	if parent := filepath.Dir(dir); parent != dir {
		resp.Parent = validUTF8(parent)
	}
	for _, e := range ents {
		name := e.Name()
		if !req.IncludeHidden && strings.HasPrefix(name, ".") {
			continue
		}
		full := filepath.Join(dir, name)
		if !isDir(e, full) || !enterable(full) {
			continue
		}
		if len(resp.Directories) == MaxDirectories {
			resp.Truncated = true
			break
		}
		resp.Directories = append(resp.Directories, &pb.DirectoryEntry{
			Name: validUTF8(name), Path: validUTF8(full), IsGitRepo: exists(filepath.Join(full, ".git")),
		})
	}
	return resp, nil
}

// ValidateDirectory tells whether a path is an existing directory the
// agent can read and enter, in words a form can show.
func (s *Service) ValidateDirectory(ctx context.Context, req *pb.ValidateDirectoryRequest) (*pb.ValidateDirectoryResponse, error) {
	if req.Path == "" {
		return &pb.ValidateDirectoryResponse{Error: "a path is required"}, nil
	}
	dir, err := s.expand(req.Path)
	if err != nil {
		return &pb.ValidateDirectoryResponse{Path: validUTF8(req.Path), Error: quote(req.Path) + " " + err.Error()}, nil
	}
	resp := &pb.ValidateDirectoryResponse{Path: validUTF8(dir)}
	fi, err := os.Stat(dir)
	switch {
	case missing(err):
		resp.Error = dir + " does not exist"
	case errors.Is(err, os.ErrPermission):
		resp.Error = dir + " is not readable"
	case err != nil:
		resp.Error = dir + ": " + err.Error()
	case !fi.IsDir():
		resp.Error = dir + " is not a directory"
	case !enterable(dir):
		resp.Error = dir + " is not readable"
	}
	if resp.Error != "" {
		resp.Error = validUTF8(resp.Error)
		return resp, nil
	}
	resp.Valid = true
	// A verdict on the directory does not hang on git: without git, or
	// with a repository git refuses, it is simply not a git work tree.
	_, resp.IsGitRepo, err = s.git.workTree(ctx, dir)
	if err != nil {
		s.opts.Logger.Debug("workspace: git rev-parse failed", "dir", dir, "err", err)
	}
	return resp, nil
}

// isDir tells whether a directory entry is a directory or a symlink to
// one.
func isDir(e fs.DirEntry, full string) bool {
	if e.IsDir() {
		return true
	}
	if e.Type()&fs.ModeSymlink == 0 {
		return false
	}
	fi, err := os.Stat(full)
	return err == nil && fi.IsDir()
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}
