package atomicfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// entries are the names in dir, so a test can see a temporary file left behind.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func TestWriteFileCreatesAndReplaces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	for _, tc := range []struct {
		data string
		perm os.FileMode
	}{
		{"first\n", 0o644},
		{"second, longer than the first\n", 0o600}, // a replaced file takes the new mode
		{"", 0o640},
	} {
		if err := WriteFile(path, []byte(tc.data), tc.perm); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tc.data {
			t.Fatalf("content %q, want %q", got, tc.data)
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != tc.perm {
			t.Fatalf("mode %v, want %v", fi.Mode().Perm(), tc.perm)
		}
		if names := entries(t, dir); len(names) != 1 || names[0] != "state.json" {
			t.Fatalf("directory holds %q; want only state.json (no temporary file left)", names)
		}
	}
}

// TestWriteFileUmask: the mode is perm exactly, whatever the umask, because
// a file HAProxy or exportfs reads must be readable by them.
func TestWriteFileUmask(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.cfg")
	if err := WriteFile(path, []byte("x"), 0o666); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o666 {
		t.Fatalf("mode %v, want 0666", fi.Mode().Perm())
	}
}

func TestWriteFileErrorsNamePath(t *testing.T) {
	dir := t.TempDir()

	missing := filepath.Join(dir, "no-such-dir", "x.cfg")
	if err := WriteFile(missing, []byte("x"), 0o644); err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("WriteFile into a missing directory = %v; want an error naming %s", err, missing)
	}

	// The target is a directory: the temporary file is written, the rename
	// fails, and the temporary file must go.
	target := filepath.Join(dir, "taken")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(target, []byte("x"), 0o644); err == nil || !strings.Contains(err.Error(), target) {
		t.Fatalf("WriteFile over a directory = %v; want an error naming %s", err, target)
	}
	if names := entries(t, dir); len(names) != 1 || names[0] != "taken" {
		t.Fatalf("directory holds %q after a failed write; want only taken", names)
	}
}

func TestWriteFileUnwritableDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ro")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "x.exports")
	if err := WriteFile(path, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	makeUnwritable(t, dir)
	err := WriteFile(path, []byte("new\n"), 0o644)
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("WriteFile into an unwritable directory = %v; want an error naming %s", err, path)
	}
	if got, _ := os.ReadFile(path); string(got) != "old\n" {
		t.Fatalf("after a failed write the file holds %q; want the old content", got)
	}
}

// makeUnwritable makes dir refuse new files until the test ends: mode 0555,
// and for a user whom modes do not stop (root) the immutable attribute,
// where the platform has one; otherwise the test is skipped.
func makeUnwritable(t *testing.T, dir string) {
	t.Helper()
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o755) })
	if !writable(dir) {
		return
	}
	makeImmutable(t, dir)
	if writable(dir) {
		t.Skipf("%s takes new files even when immutable", dir)
	}
}

// writable reports whether a file can be created in dir now.
func writable(dir string) bool {
	f, err := os.CreateTemp(dir, "probe")
	if err != nil {
		return false
	}
	f.Close()
	os.Remove(f.Name())
	return true
}

// TestWriteFileReadersSeeWholeFiles: a reader racing the writer reads the
// old content or the new, never an empty or partial file, which is what a
// truncating os.WriteFile would show it.
func TestWriteFileReadersSeeWholeFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big")
	a := bytes.Repeat([]byte("a"), 1<<20)
	b := bytes.Repeat([]byte("b"), 1<<20)
	if err := WriteFile(path, a, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	var bad []string
	wg.Add(1)
	go func() { // owned by this test: it ends when done closes
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			got, err := os.ReadFile(path)
			if err != nil {
				bad = append(bad, err.Error())
				continue
			}
			if !bytes.Equal(got, a) && !bytes.Equal(got, b) {
				bad = append(bad, fmt.Sprintf("%d bytes, neither the old content nor the new", len(got)))
			}
		}
	}()
	for i := range 20 {
		data := a
		if i%2 == 0 {
			data = b
		}
		if err := WriteFile(path, data, 0o644); err != nil {
			close(done)
			wg.Wait()
			t.Fatal(err)
		}
	}
	close(done)
	wg.Wait()
	if len(bad) > 0 {
		t.Fatalf("a reader saw %d bad reads, first: %s", len(bad), bad[0])
	}
}

func TestCreateNeverReplaces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	if err := Create(path, []byte("first"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := Create(path, []byte("second"), 0o600)
	if !errors.Is(err, fs.ErrExist) || !strings.Contains(err.Error(), path) {
		t.Fatalf("Create over an existing file = %v; want fs.ErrExist naming %s", err, path)
	}
	if got, _ := os.ReadFile(path); string(got) != "first" {
		t.Fatalf("content %q after a refused Create; want the first", got)
	}
	if names := entries(t, dir); len(names) != 1 {
		t.Fatalf("directory holds %q; want only state.json", names)
	}
}

func TestWriteStreamAndIsTemp(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bin")
	boom := errors.New("boom")
	if err := WriteStream(path, 0o755, func(w io.Writer) error {
		_, _ = w.Write([]byte("half"))
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("WriteStream whose fill fails = %v; want boom", err)
	}
	if names := entries(t, dir); len(names) != 0 {
		t.Fatalf("a failed stream left %q", names)
	}
	// A temporary file left behind is recognised as one by its name.
	f, err := os.CreateTemp(dir, ".bin.*.tmp")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if !IsTemp(filepath.Base(f.Name()), "bin") || IsTemp("bin", "bin") || IsTemp(".bin.backup", "bin") {
		t.Fatalf("IsTemp does not tell %s from the target", f.Name())
	}
	if err := WriteStream(path, 0o755, func(w io.Writer) error { _, err := w.Write([]byte("#!")); return err }); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("stat %v, %v; want mode 0755", fi, err)
	}
}
