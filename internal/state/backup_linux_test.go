package state

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// A write that fails (here the state file is immutable, as the reported
// `chattr +i` made it; a full disk fails the same way, earlier) leaves the
// state and its backup as they were: the backup is rotated only once the
// new state is in place, so the previous generation is never lost.
func TestLocalFailedWriteKeepsBackup(t *testing.T) {
	l := newLocal(t)
	doc := writeFresh(t, l)
	doc.Group("g").Instances = []Instance{{ID: "a"}}
	if err := l.Write(t.Context(), doc); err != nil {
		t.Fatal(err)
	}
	state, backup := readFile(t, l.Path()), readFile(t, l.BackupPath())
	if bytes.Equal(state, backup) {
		t.Fatal("backup equals the state after a second write; want the first generation")
	}
	setImmutable(t, l.Path())

	doc.Group("g").Instances = append(doc.Group("g").Instances, Instance{ID: "b"})
	serial := doc.Serial
	if err := l.Write(t.Context(), doc); err == nil {
		t.Fatal("Write over an immutable state file succeeded")
	}
	if doc.Serial != serial {
		t.Fatalf("serial moved to %d on a failed write", doc.Serial)
	}
	if got := readFile(t, l.Path()); !bytes.Equal(got, state) {
		t.Fatalf("state changed by a failed write:\n%s", got)
	}
	if got := readFile(t, l.BackupPath()); !bytes.Equal(got, backup) {
		t.Fatalf("backup rotated by a failed write: now\n%s\nwant the previous generation\n%s", got, backup)
	}
	clearImmutable(t, l.Path())
	want := []string{"infrakit.state.json", "infrakit.state.json.backup", "infrakit.state.json.lock"}
	if err := l.Write(t.Context(), doc); err != nil {
		t.Fatalf("Write once the file is writable again: %v", err)
	}
	if got := readFile(t, l.BackupPath()); !bytes.Equal(got, state) {
		t.Fatalf("backup after the successful write is not the state it replaced:\n%s", got)
	}
	if names := dirNames(t, filepath.Dir(l.Path())); !slices.Equal(names, want) {
		t.Fatalf("directory holds %q, want %q (no temporary file left)", names, want)
	}
}

// fsImmutableFL is FS_IMMUTABLE_FL of linux/fs.h.
const fsImmutableFL = 0x10

// setImmutable sets the immutable attribute of path until the test ends,
// or skips the test where it cannot (no CAP_LINUX_IMMUTABLE, a file system
// without attributes).
func setImmutable(t *testing.T, path string) {
	t.Helper()
	if err := chattr(path, true); err != nil {
		t.Skipf("cannot make %s immutable: %v", path, err)
	}
	t.Cleanup(func() { _ = chattr(path, false) })
}

func clearImmutable(t *testing.T, path string) {
	t.Helper()
	if err := chattr(path, false); err != nil {
		t.Fatal(err)
	}
}

func chattr(path string, on bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	flags, err := unix.IoctlGetInt(int(f.Fd()), unix.FS_IOC_GETFLAGS)
	if err != nil {
		return err
	}
	if on {
		flags |= fsImmutableFL
	} else {
		flags &^= fsImmutableFL
	}
	return unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, flags)
}
