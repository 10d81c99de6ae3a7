package state

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func newLocal(t *testing.T) *Local {
	t.Helper()
	return NewLocal(filepath.Join(t.TempDir(), "infrakit.state.json"))
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// writeFresh stores a new document (serial 1) and returns it.
func writeFresh(t *testing.T, l *Local) *Document {
	t.Helper()
	doc, err := l.Read(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Write(t.Context(), doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// dirNames lists the directory, to check no stray files are left.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestLocalReadMissingGivesNewDocument(t *testing.T) {
	l := newLocal(t)
	doc, err := l.Read(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !doc.IsNew() || doc.Version != FormatVersion || doc.Lineage == "" {
		t.Errorf("Read of a missing state = %+v", doc)
	}
	again, _ := l.Read(t.Context())
	if again.Lineage == doc.Lineage {
		t.Error("two reads of a missing state share a lineage")
	}
	if names := dirNames(t, filepath.Dir(l.Path())); len(names) != 0 {
		t.Errorf("Read created files: %v", names)
	}
}

func TestLocalRoundTrip(t *testing.T) {
	l := newLocal(t)
	doc := sampleDoc()
	doc.Serial = 0 // as read from a missing state
	if err := l.Write(t.Context(), doc); err != nil {
		t.Fatal(err)
	}
	if doc.Serial != 1 || doc.IsNew() {
		t.Fatalf("after the first write Serial = %d", doc.Serial)
	}
	want, _ := Encode(doc)
	if got := readFile(t, l.Path()); !bytes.Equal(got, want) {
		t.Errorf("file holds\n%s\nwant\n%s", got, want)
	}
	fi, err := os.Stat(l.Path())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("new state file mode %v, want 0600", fi.Mode().Perm())
	}
	got, err := l.Read(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if enc, _ := Encode(got); !bytes.Equal(enc, want) {
		t.Errorf("Read gave\n%s\nwant\n%s", enc, want)
	}
	if _, err := os.Stat(l.BackupPath()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("first write made a backup (err %v)", err)
	}
	if names := dirNames(t, filepath.Dir(l.Path())); strings.Join(names, " ") != "infrakit.state.json infrakit.state.json.lock" {
		t.Errorf("directory holds %v", names)
	}
}

func TestLocalSerialIncrementsAndBackupIsPrevious(t *testing.T) {
	l := newLocal(t)
	doc := writeFresh(t, l)
	prev := readFile(t, l.Path())
	for want := uint64(2); want <= 6; want++ {
		doc.Group("g").Instances = append(doc.Group("g").Instances, Instance{ID: strconv.Itoa(int(want))})
		if err := l.Write(t.Context(), doc); err != nil {
			t.Fatal(err)
		}
		if doc.Serial != want {
			t.Fatalf("Serial = %d, want %d", doc.Serial, want)
		}
		stored, err := l.Read(t.Context())
		if err != nil || stored.Serial != want || len(stored.Groups["g"].Instances) != int(want-1) {
			t.Fatalf("stored %+v, %v", stored, err)
		}
		if backup := readFile(t, l.BackupPath()); !bytes.Equal(backup, prev) {
			t.Fatalf("backup after serial %d is not the previous file:\n%s\nwant\n%s", want, backup, prev)
		}
		prev = readFile(t, l.Path())
	}
}

func TestLocalKeepsFileMode(t *testing.T) {
	l := newLocal(t)
	doc := writeFresh(t, l)
	if err := os.Chmod(l.Path(), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := l.Write(t.Context(), doc); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(l.Path()); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v after rewrite, want 0640", fi.Mode().Perm())
	}
}

func TestLocalCompareAndSwap(t *testing.T) {
	l := newLocal(t)
	writeFresh(t, l)
	a, _ := l.Read(t.Context())
	b, _ := l.Read(t.Context())
	if err := l.Write(t.Context(), a); err != nil {
		t.Fatal(err)
	}
	stored := readFile(t, l.Path())

	check := func(t *testing.T, doc *Document, kind error, msg string) {
		t.Helper()
		serial := doc.Serial
		err := l.Write(t.Context(), doc)
		if !errors.Is(err, kind) {
			t.Fatalf("Write = %v, want %v", err, kind)
		}
		var ce *ConflictError
		if !errors.As(err, &ce) || ce.State != l.Path() {
			t.Fatalf("error %T does not name the state", err)
		}
		if !regexp.MustCompile(msg).MatchString(err.Error()) {
			t.Errorf("message %q does not match %q", err, msg)
		}
		if doc.Serial != serial {
			t.Errorf("failed Write changed doc.Serial to %d", doc.Serial)
		}
		if now, _ := os.ReadFile(l.Path()); !bytes.Equal(now, stored) {
			t.Error("failed Write changed the file")
		}
	}
	t.Run("stale serial", func(t *testing.T) {
		check(t, b, ErrSerialMoved, `^state .*infrakit\.state\.json is at serial 2 but this document was read at serial 1: another writer changed it; read it again and retry$`)
	})
	t.Run("new document over an existing state", func(t *testing.T) {
		check(t, NewDocument(), ErrSerialMoved, `was created by another writer \(serial 2\) after this document was read as new`)
	})
	t.Run("foreign lineage", func(t *testing.T) {
		foreign := NewDocument()
		foreign.Serial = 2
		check(t, foreign, ErrLineage, `has lineage `+a.Lineage+` but this document has lineage `+foreign.Lineage+`: it is a different state; refusing to overwrite it`)
	})
	t.Run("state removed since read", func(t *testing.T) {
		if err := os.Remove(l.Path()); err != nil {
			t.Fatal(err)
		}
		err := l.Write(t.Context(), a)
		if !errors.Is(err, ErrSerialMoved) || !strings.Contains(err.Error(), "no longer exists") {
			t.Fatalf("Write = %v", err)
		}
		if _, err := os.Stat(l.Path()); !errors.Is(err, os.ErrNotExist) {
			t.Error("Write recreated a removed state")
		}
	})
}

func TestLocalWriteRejectsBadDocuments(t *testing.T) {
	l := newLocal(t)
	newer := NewDocument()
	newer.Version = FormatVersion + 1
	for name, doc := range map[string]*Document{
		"nil":        nil,
		"no lineage": {Version: FormatVersion},
		"newer":      newer,
	} {
		if err := l.Write(t.Context(), doc); err == nil {
			t.Errorf("%s: Write accepted it", name)
		}
	}
	if _, err := os.Stat(l.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Error("a rejected Write created the state")
	}
}

// A refused file is never overwritten, whatever document is written.
func TestLocalRefusedFilesAreNeverOverwritten(t *testing.T) {
	for _, tc := range []struct{ name, data, want string }{
		{"empty", "", "is empty"},
		{"truncated", `{"version": 1, "serial": 4, "lineage": "L", "groups": {"g": {"inst`, "is truncated"},
		{"corrupt", "{\"version\": 1,\n\"serial\": 4 4}", "is not valid JSON: line 2, col"},
		{"newer", `{"version": 2, "serial": 4, "lineage": "L"}`, "newer infrakit (format 2); this build reads up to 1"},
		{"no lineage", `{"version": 1, "serial": 4}`, `no "lineage"`},
		{"nul", "\x00\x00\x00", "NUL bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, withBackup := range []bool{false, true} {
				l := newLocal(t)
				if withBackup {
					doc := writeFresh(t, l)
					if err := l.Write(t.Context(), doc); err != nil {
						t.Fatal(err)
					}
				}
				if err := os.WriteFile(l.Path(), []byte(tc.data), 0o600); err != nil {
					t.Fatal(err)
				}
				var backup []byte
				if withBackup {
					backup = readFile(t, l.BackupPath())
				}

				_, err := l.Read(t.Context())
				if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), l.Path()) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("Read = %v; want ErrInvalid naming the file and %q", err, tc.want)
				}
				if hint := "the previous state is kept in " + l.BackupPath(); strings.Contains(err.Error(), hint) != withBackup {
					t.Errorf("backup hint present = %v, want %v: %v", !withBackup, withBackup, err)
				}

				// A new document, and one forged to match what is there.
				forged := NewDocument()
				forged.Lineage, forged.Serial = "L", 4
				for _, doc := range []*Document{NewDocument(), forged} {
					if err := l.Write(t.Context(), doc); !errors.Is(err, ErrInvalid) {
						t.Errorf("Write over a refused file = %v, want ErrInvalid", err)
					}
				}
				if got := readFile(t, l.Path()); string(got) != tc.data {
					t.Errorf("refused file changed to %q", got)
				}
				if withBackup {
					if got := readFile(t, l.BackupPath()); !bytes.Equal(got, backup) {
						t.Error("backup changed")
					}
				} else if _, err := os.Stat(l.BackupPath()); !errors.Is(err, os.ErrNotExist) {
					t.Error("a backup appeared")
				}
				for _, n := range dirNames(t, filepath.Dir(l.Path())) {
					if strings.Contains(n, ".tmp-") {
						t.Errorf("temp file %s left behind", n)
					}
				}
			}
		})
	}
}

// After Write has cached the file it wrote, an in-place edit must still be
// noticed: the cache is only used when the bytes are identical.
func TestLocalNoticesInPlaceEdit(t *testing.T) {
	l := newLocal(t)
	doc := writeFresh(t, l)
	data := readFile(t, l.Path())
	edited := bytes.Replace(data, []byte(`"serial": 1`), []byte(`"serial": 9`), 1)
	if bytes.Equal(edited, data) {
		t.Fatal("test setup: serial not found")
	}
	if err := os.WriteFile(l.Path(), edited, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := l.Write(t.Context(), doc); !errors.Is(err, ErrSerialMoved) {
		t.Fatalf("Write after an in-place edit = %v, want ErrSerialMoved", err)
	}
	if err := os.WriteFile(l.Path(), data[:len(data)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	if err := l.Write(t.Context(), doc); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Write over a truncated file = %v, want ErrInvalid", err)
	}
}

// Leftovers of a writer that crashed before its rename are ignored by Read
// and removed by the next Write.
func TestLocalIgnoresAndRemovesLeftoverTempFiles(t *testing.T) {
	l := newLocal(t)
	doc := writeFresh(t, l)
	dir := filepath.Dir(l.Path())
	leftovers := []string{".infrakit.state.json.123.tmp", ".infrakit.state.json.backup.abc.tmp",
		"infrakit.state.json.tmp-123", "infrakit.state.json.backup.tmp-abc"} // this version's names, and earlier ones'
	for _, n := range leftovers {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(`{"version": 1, "ser`), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	unrelated := filepath.Join(dir, "other.tmp-1")
	if err := os.WriteFile(unrelated, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := l.Read(t.Context())
	if err != nil || got.Serial != 1 {
		t.Fatalf("Read with leftovers = %+v, %v", got, err)
	}
	if err := l.Write(t.Context(), doc); err != nil {
		t.Fatal(err)
	}
	for _, n := range leftovers {
		if _, err := os.Stat(filepath.Join(dir, n)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("leftover %s not removed", n)
		}
	}
	if _, err := os.Stat(unrelated); err != nil {
		t.Errorf("an unrelated file was removed: %v", err)
	}
}

func TestLocalRelativePath(t *testing.T) {
	t.Chdir(t.TempDir())
	l := NewLocal("infrakit.state.json")
	doc := writeFresh(t, l)
	if err := l.Write(t.Context(), doc); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("infrakit.state.json.backup"); err != nil {
		t.Error(err)
	}
}

// A writer process killed at a random moment of its write loop leaves a
// whole state behind: the file (and its backup) always decode, and no
// acknowledged serial is lost.
func TestLocalKilledWriterLeavesWholeState(t *testing.T) {
	l := newLocal(t)
	var acked uint64
	for round := range 4 {
		h := startHelper(t, "write-loop", l.Path())
		for range 3 + round {
			n, err := strconv.ParseUint(h.line(t), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			acked = n
		}
		time.Sleep(time.Duration(round) * 3 * time.Millisecond)
		if err := h.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = h.cmd.Wait()

		doc, err := l.Read(t.Context())
		if err != nil {
			t.Fatalf("round %d: state torn by a killed writer: %v", round, err)
		}
		if doc.Serial < acked || uint64(len(markers(doc))) != doc.Serial {
			t.Fatalf("round %d: serial %d with %d markers; last acknowledged %d", round, doc.Serial, len(markers(doc)), acked)
		}
		if _, err := Decode("backup", readFile(t, l.BackupPath())); err != nil {
			t.Fatalf("round %d: backup torn: %v", round, err)
		}
	}
	// The next writer takes the lock the dead one held, and cleans up.
	if _, err := lockedIncrement(l, "after"); err != nil {
		t.Fatal(err)
	}
	for _, n := range dirNames(t, filepath.Dir(l.Path())) {
		if strings.Contains(n, ".tmp-") {
			t.Errorf("temp file %s left behind", n)
		}
	}
}

func TestLocalReadHonoursContext(t *testing.T) {
	l := newLocal(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := l.Read(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Read with a cancelled context = %v", err)
	}
}

// State must still be saved after an interrupt: a done ctx only stops
// waiting, it does not stop a write that can proceed.
func TestLocalWriteWithDoneContext(t *testing.T) {
	l := newLocal(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	doc := NewDocument()
	if err := l.Write(ctx, doc); err != nil {
		t.Fatalf("Write with a done ctx and a free lock: %v", err)
	}
	unlock, err := l.Lock(t.Context(), LockInfo{Operation: "apply"})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Write(ctx, doc); err != nil {
		t.Fatalf("Write with a done ctx under the held lock: %v", err)
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	if doc.Serial != 2 {
		t.Errorf("serial %d, want 2", doc.Serial)
	}
}

func TestLocalRefusalMessage(t *testing.T) {
	l := newLocal(t)
	doc := writeFresh(t, l)
	if err := l.Write(t.Context(), doc); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(l.Path(), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := l.Read(t.Context())
	want := "state " + l.Path() + ": is empty (truncated by a crash?); refusing to use or overwrite it; the previous state is kept in " + l.Path() + ".backup"
	if err == nil || err.Error() != want {
		t.Errorf("got  %v\nwant %s", err, want)
	}
}

// A writer that died after keeping the backup but before replacing the state
// leaves the backup a hard link of the state itself; the next write must not
// leave its temporary backup name behind.
func TestLocalBackupSameFileAsState(t *testing.T) {
	l := newLocal(t)
	doc := writeFresh(t, l)
	if err := os.Remove(l.BackupPath()); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if err := os.Link(l.Path(), l.BackupPath()); err != nil {
		t.Fatal(err)
	}
	if err := l.Write(t.Context(), doc); err != nil {
		t.Fatal(err)
	}
	for _, n := range dirNames(t, filepath.Dir(l.Path())) {
		if strings.Contains(n, ".tmp-") {
			t.Errorf("temp file %s left behind", n)
		}
	}
}
