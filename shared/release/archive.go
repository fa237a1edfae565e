package release

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sort"
	"strings"
	"time"
)

// File is one entry of an archive: a regular file.
type File struct {
	Name string // path inside the archive, with slashes
	Mode fs.FileMode
	Data []byte
}

// archiveExt is the archive's extension for a platform.
func archiveExt(goos string) string {
	if goos == "windows" {
		return ".zip"
	}
	return ".tar.gz"
}

// ArchiveName is the file name of binary's archive for a platform.
func ArchiveName(binary, version, goos, goarch string) string {
	return fmt.Sprintf("%s_%s_%s_%s%s", binary, version, goos, goarch, archiveExt(goos))
}

// WriteArchive writes files as a tar.gz (or, for windows, a zip) whose
// bytes depend only on files and mtime: entries sorted by name, owned by
// root with no user or group names, dated mtime, gzip with no name or time.
func WriteArchive(w io.Writer, goos string, files []File, mtime time.Time) error {
	files = append([]File(nil), files...)
	sort.Slice(files, func(i, j int) bool { return files[i].Name < files[j].Name })
	mtime = mtime.UTC().Truncate(time.Second)
	if goos == "windows" {
		return writeZip(w, files, mtime)
	}
	return writeTarGz(w, files, mtime)
}

func writeTarGz(w io.Writer, files []File, mtime time.Time) error {
	gz, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	gz.ModTime = time.Time{} // no timestamp in the gzip header
	tw := tar.NewWriter(gz)
	for _, f := range files {
		h := &tar.Header{
			Typeflag: tar.TypeReg,
			Name:     f.Name,
			Mode:     int64(f.Mode.Perm()),
			Size:     int64(len(f.Data)),
			ModTime:  mtime,
			Format:   tar.FormatUSTAR,
		}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("tar %s: %w", f.Name, err)
		}
		if _, err := tw.Write(f.Data); err != nil {
			return fmt.Errorf("tar %s: %w", f.Name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

func writeZip(w io.Writer, files []File, mtime time.Time) error {
	zw := zip.NewWriter(w)
	for _, f := range files {
		h := &zip.FileHeader{Name: f.Name, Method: zip.Deflate, Modified: mtime}
		h.SetMode(f.Mode)
		fw, err := zw.CreateHeader(h)
		if err != nil {
			return fmt.Errorf("zip %s: %w", f.Name, err)
		}
		if _, err := fw.Write(f.Data); err != nil {
			return fmt.Errorf("zip %s: %w", f.Name, err)
		}
	}
	return zw.Close()
}

// maxBinary bounds a file read from an archive (a binary is ~30 MB).
const maxBinary = 512 << 20

// ExtractFile returns the regular file name of a tar.gz or zip archive
// (named archiveName, whose extension says which).
func ExtractFile(archiveName string, data []byte, name string) ([]byte, error) {
	if strings.HasSuffix(archiveName, ".zip") {
		zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", archiveName, err)
		}
		for _, f := range zr.File {
			if f.Name == name && f.Mode().IsRegular() {
				r, err := f.Open()
				if err != nil {
					return nil, fmt.Errorf("read %s from %s: %w", name, archiveName, err)
				}
				defer r.Close()
				return readLimited(r, archiveName, name)
			}
		}
		return nil, fmt.Errorf("%s has no %s", archiveName, name)
	}
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", archiveName, err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s has no %s", archiveName, name)
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", archiveName, err)
		}
		if h.Name == name && h.Typeflag == tar.TypeReg {
			return readLimited(tr, archiveName, name)
		}
	}
}

func readLimited(r io.Reader, archiveName, name string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxBinary+1))
	if err != nil {
		return nil, fmt.Errorf("read %s from %s: %w", name, archiveName, err)
	}
	if len(b) > maxBinary {
		return nil, fmt.Errorf("%s in %s is larger than %d bytes", name, archiveName, maxBinary)
	}
	return b, nil
}
