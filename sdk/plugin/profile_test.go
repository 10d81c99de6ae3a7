package plugin

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// The provider writes the CPU and heap profiles its environment asks for,
// each to <prefix>.<pid>, when it is done.
func TestProviderProfiles(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(EnvProviderCPUProfile, filepath.Join(dir, "cpu"))
	t.Setenv(EnvProviderMemProfile, filepath.Join(dir, "mem"))
	startProfile(hclog.NewNullLogger())()
	for _, prefix := range []string{"cpu", "mem"} {
		path := filepath.Join(dir, fmt.Sprintf("%s.%d", prefix, os.Getpid()))
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		// pprof writes gzipped protocol buffers.
		if !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
			t.Errorf("%s: %d bytes, not a gzipped profile", path, len(b))
		}
	}
}
