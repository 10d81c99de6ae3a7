package pluginhost

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"pgregory.net/rapid"
)

const (
	hashA = Hash("sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
	hashB = Hash("sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb")
	hashC = Hash("sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
)

// goldenLock is the exact file for the providers set in TestLockGolden.
const goldenLock = `# This file is maintained automatically by "infrakit init" and "infrakit plugins".
# Manual edits may be lost in future updates. Commit it with your stack.

provider "simulator" {
  version = "0.1.0"
  hashes  = ["sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"]
}

provider "vanilla" {
  version = "0.2.0"
  hashes  = ["sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"]
}
`

func TestLockGolden(t *testing.T) {
	l := NewLock()
	// Set out of order, hashes unsorted and duplicated: the file is sorted anyway.
	l.Set(LockedProvider{Name: "vanilla", Version: "0.2.0", Hashes: []Hash{hashC}})
	l.Set(LockedProvider{Name: "simulator", Version: "0.1.0", Hashes: []Hash{hashB, hashA, hashB}})
	if got := string(l.Bytes()); got != goldenLock {
		t.Errorf("lock file:\n%s\nwant:\n%s", got, goldenLock)
	}

	dir := t.TempDir()
	if err := l.Save(dir); err != nil {
		t.Fatal(err)
	}
	onDisk, err := os.ReadFile(filepath.Join(dir, LockFileName))
	if err != nil || string(onDisk) != goldenLock {
		t.Fatalf("saved lock file = %q, %v", onDisk, err)
	}
	back, err := LoadLock(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Providers(), l.Providers()) {
		t.Errorf("read back %v, want %v", back.Providers(), l.Providers())
	}
}

func TestLoadLockMissingIsEmpty(t *testing.T) {
	l, err := LoadLock(t.TempDir())
	if err != nil || len(l.Providers()) != 0 {
		t.Fatalf("LoadLock of empty dir = %v, %v; want empty lock", l.Providers(), err)
	}
}

func TestLockRemove(t *testing.T) {
	l := NewLock()
	l.Set(LockedProvider{Name: "simulator", Version: "0.1.0", Hashes: []Hash{hashA}})
	if !l.Remove("simulator") || l.Remove("simulator") {
		t.Error("Remove should report true once, then false")
	}
	if _, ok := l.Provider("simulator"); ok {
		t.Error("removed provider still present")
	}
}

func TestParseLockErrors(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"syntax", "provider \"simulator\" {\n  version = \n}\n", "lock.hcl:2,"},
		{"top-level attribute", "version = \"1\"\n", "lock.hcl:1,1-8: Unexpected attribute in lock file"},
		{"other block", "\nmodule \"x\" {}\n", "lock.hcl:2,1-7: Unsupported block type in lock file"},
		{"no label", "provider {\n}\n", "lock.hcl:1,1-9: Provider block needs one name"},
		{"missing hashes", "provider \"simulator\" {\n  version = \"0.1.0\"\n}\n", `lock.hcl:1,1-21: Missing attribute in provider lock; Provider "simulator" needs "hashes"`},
		{"bad version", "provider \"s\" {\n  version = 1\n  hashes = []\n}\n", "lock.hcl:2,13-14: Invalid provider version"},
		{"bad hash", "provider \"s\" {\n  version = \"1\"\n  hashes = [\"" + string(hashA) + "\",\n  \"md5:00\"]\n}\n", "lock.hcl:4,3-11: Invalid provider hash"},
		{"hashes not a list", "provider \"s\" {\n  version = \"1\"\n  hashes = \"x\"\n}\n", "lock.hcl:3,12-15: Invalid provider hashes"},
		{"unknown attribute", "provider \"s\" {\n  version = \"1\"\n  hashes = []\n  source = \"x\"\n}\n", "lock.hcl:4,3-9: Unsupported attribute in provider lock"},
		{"duplicate", "provider \"s\" {\n  version = \"1\"\n  hashes = []\n}\nprovider \"s\" {\n  version = \"1\"\n  hashes = []\n}\n", "lock.hcl:5,1-13: Duplicate provider in lock file"},
		{"variable", "provider \"s\" {\n  version = var.v\n  hashes = []\n}\n", "lock.hcl:2,13-16: Variables not allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lock, diags := ParseLock([]byte(tt.src), "lock.hcl")
			if !diags.HasErrors() || lock != nil {
				t.Fatalf("ParseLock = %v, %v; want errors", lock, diags)
			}
			if !strings.Contains(diags.Error(), tt.want) {
				t.Errorf("diagnostics %q do not contain %q", diags.Error(), tt.want)
			}
		})
	}
}

// A malformed lock file on disk is reported with its path and line, and the
// diagnostics survive as hcl.Diagnostics for rendering.
func TestLoadLockReportsFileAndLine(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, LockFileName)
	if err := os.WriteFile(path, []byte("provider \"s\" {\n  version = \"1\"\n  hashes = [\"nope\"]\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadLock(dir)
	var diags hcl.Diagnostics
	if !errors.As(err, &diags) {
		t.Fatalf("LoadLock = %v, want hcl.Diagnostics", err)
	}
	if want := path + ":3,13-19: Invalid provider hash"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not contain %q", err, want)
	}
}

// Any lock survives a write and a read, and its file lists providers sorted.
func TestLockRoundTripProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		l := NewLock()
		names := rapid.SliceOfDistinct(rapid.StringMatching(`[a-z][a-z0-9-]{0,12}`), rapid.ID[string]).Draw(t, "names")
		for _, n := range names {
			hexes := rapid.SliceOfN(rapid.StringMatching(`[0-9a-f]{64}`), 0, 3).Draw(t, "hashes")
			hashes := make([]Hash, len(hexes))
			for i, h := range hexes {
				hashes[i] = Hash(hashPrefix + h)
			}
			l.Set(LockedProvider{
				Name:    n,
				Version: rapid.StringMatching(`[0-9]\.[0-9]{1,2}\.[0-9](-[a-z]+)?`).Draw(t, "version"),
				Hashes:  hashes,
			})
		}
		src := l.Bytes()
		back, diags := ParseLock(src, "lock.hcl")
		if diags.HasErrors() {
			t.Fatalf("ParseLock(Bytes()) failed: %v\n%s", diags, src)
		}
		if !reflect.DeepEqual(normalize(back.Providers()), normalize(l.Providers())) {
			t.Fatalf("round trip:\n%v\nwant\n%v", back.Providers(), l.Providers())
		}
		// Blocks appear in name order.
		last := -1
		for _, p := range l.Providers() {
			i := strings.Index(string(src), "provider \""+p.Name+"\"")
			if i < last {
				t.Fatalf("provider %q out of order in\n%s", p.Name, src)
			}
			last = i
		}
	})
}

// normalize makes nil and empty hash lists equal.
func normalize(ps []LockedProvider) []LockedProvider {
	for i := range ps {
		if len(ps[i].Hashes) == 0 {
			ps[i].Hashes = nil
		}
	}
	return ps
}

func TestParseHash(t *testing.T) {
	for s, ok := range map[string]bool{
		string(hashA):                       true,
		"sha256:abc":                        false,
		"md5:" + string(hashA)[7:]:          false,
		"sha256:" + strings.Repeat("g", 64): false,
	} {
		if _, err := ParseHash(s); (err == nil) != ok {
			t.Errorf("ParseHash(%q) = %v, want ok=%v", s, err, ok)
		}
	}
}
