package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// providersStack names both shipped providers and uses them, so commands
// that plan must launch them.
const providersStack = `
stack "tamper" {}

provider "simulator" {}
provider "vanilla" {}

group "web" {
  size = 1
  instance {
    provider = simulator
    type     = "compute"
  }
  flavor { provider = vanilla }
}
`

// TestInitAndTamper is issue 2's check: init installs both providers and
// pins them; a changed byte in an installed binary makes the next command
// refuse it, naming the file and both checksums.
func TestInitAndTamper(t *testing.T) {
	w := newWorkdir(t)
	w.writeFile("main.hcl", providersStack)
	res := w.ok("init", "-plugin-dir", binDir)
	for _, want := range []string{"Installed simulator", "Installed vanilla", ".infrakit.lock.hcl"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("init output lacks %q:\n%s", want, res)
		}
	}

	platform := runtime.GOOS + "_" + runtime.GOARCH
	installed := map[string]string{}
	for _, name := range []string{"simulator", "vanilla"} {
		matches, err := filepath.Glob(filepath.Join(w.dir, ".infrakit", "plugins", name, "*", platform, "infrakit-provider-"+name))
		if err != nil || len(matches) != 1 {
			t.Fatalf("installed %s: %q (%v), want one .infrakit/plugins/%s/<version>/%s/infrakit-provider-%s", name, matches, err, name, platform, name)
		}
		installed[name] = matches[0]
	}

	lock, err := os.ReadFile(filepath.Join(w.dir, ".infrakit.lock.hcl"))
	if err != nil {
		t.Fatalf("init wrote no lock file: %v", err)
	}
	locked := lockedHashes(t, string(lock))
	for name, path := range installed {
		if got := fileHash(t, path); locked[name] != got {
			t.Errorf("lock file pins %s at %q; the installed binary is %q", name, locked[name], got)
		}
	}

	// A second init reuses what is installed and leaves the lock file alone.
	res = w.ok("init", "-plugin-dir", binDir)
	if again, _ := os.ReadFile(filepath.Join(w.dir, ".infrakit.lock.hcl")); string(again) != string(lock) {
		t.Errorf("a second init changed the lock file:\n%s\n---\n%s", lock, again)
	}
	w.ok("plan")

	// Flip one byte in the middle of the installed simulator.
	path := installed["simulator"]
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(path, b, 0o755); err != nil {
		t.Fatal(err)
	}
	tampered := fileHash(t, path)

	res = w.expect(1, "plan")
	for _, want := range []string{path, locked["simulator"], tampered} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("plan with a changed simulator: stderr lacks %q\n%s", want, res)
		}
	}
	if files := w.simulatorInstances("compute"); len(files) != 0 {
		t.Errorf("the refused provider ran: simulator holds %q", files)
	}

	// plugins ls says which binary changed.
	res = w.ok("plugins", "ls", "-json")
	var ls struct {
		Providers []struct{ Name, Status string }
	}
	if err := json.Unmarshal([]byte(res.stdout), &ls); err != nil {
		t.Fatalf("plugins ls -json: %v\n%s", err, res)
	}
	status := map[string]string{}
	for _, p := range ls.Providers {
		status[p.Name] = p.Status
	}
	if status["simulator"] != "mismatch" || status["vanilla"] != "ok" {
		t.Errorf("plugins ls statuses %v, want simulator mismatch and vanilla ok", status)
	}
}

// lockedHashes reads each provider's first hash from a lock file.
func lockedHashes(t *testing.T, lock string) map[string]string {
	t.Helper()
	out := map[string]string{}
	block := regexp.MustCompile(`(?s)provider\s+"([a-z0-9-]+)"\s*\{(.*?)\n\}`)
	hash := regexp.MustCompile(`sha256:[0-9a-f]{64}`)
	for _, m := range block.FindAllStringSubmatch(lock, -1) {
		out[m[1]] = hash.FindString(m[2])
	}
	if out["simulator"] == "" || out["vanilla"] == "" {
		t.Fatalf("lock file does not pin simulator and vanilla with sha256 hashes:\n%s", lock)
	}
	return out
}

func fileHash(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}
