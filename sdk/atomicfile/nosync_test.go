package atomicfile

import (
	"bufio"
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var noSync = Options{NoSync: true}

// TestNoSyncWritesAtomically: without the syncs, a write still creates or
// replaces the file whole, with the mode asked, and leaves no temporary
// file; a create still never replaces.
func TestNoSyncWritesAtomically(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "obj.json")
	if err := CreateOpts(path, []byte("first"), 0o600, noSync); err != nil {
		t.Fatal(err)
	}
	if err := CreateOpts(path, []byte("again"), 0o600, noSync); !errors.Is(err, fs.ErrExist) || !strings.Contains(err.Error(), path) {
		t.Fatalf("CreateOpts over an existing file = %v; want fs.ErrExist naming %s", err, path)
	}
	if err := WriteFileOpts(path, []byte("second"), 0o640, noSync); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != "second" {
		t.Fatalf("content %q, %v; want second", got, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o640 {
		t.Fatalf("stat %v, %v; want mode 0640", fi, err)
	}
	if names := entries(t, dir); len(names) != 1 {
		t.Fatalf("directory holds %q; want only obj.json", names)
	}
	if err := WriteFileOpts(filepath.Join(dir, "missing", "x"), nil, 0o600, noSync); err == nil {
		t.Fatal("WriteFileOpts into a missing directory succeeded")
	}
}

// crashWriterEnv makes the test binary a writer that rewrites a file in a
// loop with NoSync until it is killed (see TestNoSyncSurvivesSIGKILL).
const crashWriterEnv = "ATOMICFILE_TEST_CRASH_WRITER"

func TestMain(m *testing.M) {
	if path := os.Getenv(crashWriterEnv); path != "" {
		crashWriter(path)
	}
	os.Exit(m.Run())
}

// crashWriter alternates two 1 MiB contents in path, saying "wrote" on
// stdout after each write, until killed.
func crashWriter(path string) {
	contents := [][]byte{bytes.Repeat([]byte("a"), 1<<20), bytes.Repeat([]byte("b"), 1<<20)}
	for i := 0; ; i++ {
		if err := WriteFileOpts(path, contents[i%2], 0o600, noSync); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Stdout.WriteString("wrote\n")
	}
}

// TestNoSyncSurvivesSIGKILL: a writer killed mid-loop leaves the file whole
// (the old content or the new), which is the promise NoSync keeps: only a
// power loss may cost a write.
func TestNoSyncSurvivesSIGKILL(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "obj.json")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashWriterEnv+"="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	for range 20 { // the kill lands while it is writing again
		if !lines.Scan() {
			cmd.Wait()
			t.Fatalf("writer stopped early: %v", lines.Err())
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1<<20 || (!bytes.Equal(got, bytes.Repeat(got[:1], 1<<20))) {
		t.Fatalf("after SIGKILL the file holds %d bytes, neither content whole", len(got))
	}
	for _, n := range entries(t, dir) {
		if n != "obj.json" && !IsTemp(n, "obj.json") {
			t.Fatalf("after SIGKILL the directory holds %q", n)
		}
	}
}
