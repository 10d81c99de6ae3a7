package operation

import (
	"fmt"
	"testing"
	"time"

	"github.com/infrakit/infrakit/internal/pluginhost"
)

// configuredStack has a provider block with attributes; scale is its
// configuration.
const configuredStack = `
stack "test" {}

provider "simulator" {}
provider "configured" { scale = %d }

group "web" {
  size = 1
  instance {
    provider   = simulator
    type       = "compute"
    properties = {}
  }
  flavor {
    provider = simulator
    type     = "simulator"
  }
}
`

func newConfiguredWorkdir(t *testing.T, scale int) *workdir {
	t.Helper()
	w := &workdir{t: t, dir: t.TempDir()}
	w.writeStack(fmt.Sprintf(configuredStack, scale))
	if _, err := pluginhost.Init(ctxT(t), w.dir, []string{"simulator", "configured"}, pluginhost.InitOptions{
		SearchDirs: pluginhost.SearchDirs([]string{testBin}),
	}); err != nil {
		t.Fatal(err)
	}
	return w
}

// scaleOf asks the runner's configured provider what scale it was
// configured with (-1: none).
func scaleOf(t *testing.T, r *Runner) float64 {
	t.Helper()
	ctx := ctxT(t)
	h, err := r.PluginHost()
	if err != nil {
		t.Fatal(err)
	}
	c, err := h.Client(ctx, "configured")
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Metrics("config").Query(ctx, "scale", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Empty {
		return -1
	}
	return s.Value
}

func TestProviderBlockConfiguresProvider(t *testing.T) {
	ctx := ctxT(t)
	w := newConfiguredWorkdir(t, 3)
	r := w.runner(Options{})
	load(t, ctx, r)
	if got := scaleOf(t, r); got != 3 {
		t.Fatalf("after loading the stack, scale = %v, want 3", got)
	}
	// A host made anew configures its processes as the old one did.
	if err := r.ResetHost(); err != nil {
		t.Fatal(err)
	}
	if got := scaleOf(t, r); got != 3 {
		t.Fatalf("after ResetHost, scale = %v, want 3", got)
	}
	// Changed files reach the running process at the next load.
	w.writeStack(fmt.Sprintf(configuredStack, 4))
	load(t, ctx, r)
	if got := scaleOf(t, r); got != 4 {
		t.Fatalf("after loading the changed stack, scale = %v, want 4", got)
	}
}

func TestAppliedProviderBlockConfiguresVerbs(t *testing.T) {
	ctx := ctxT(t)
	w := newConfiguredWorkdir(t, 5)
	planAndApply(t, ctx, w.runner(Options{}), PlanMode{})
	// A command that reads the applied stack, not the files, configures
	// the providers with its blocks.
	w.writeStack(fmt.Sprintf(configuredStack, 6))
	r := w.runner(Options{})
	if _, err := r.Groups().Describe(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if got := scaleOf(t, r); got != 5 {
		t.Fatalf("after describing the applied groups, scale = %v, want the applied 5", got)
	}
}

func TestKeepProviderConfigIgnoresStackFiles(t *testing.T) {
	ctx := ctxT(t)
	w := newConfiguredWorkdir(t, 7)
	applied := load(t, ctx, w.runner(Options{}))
	w.writeStack(fmt.Sprintf(configuredStack, 8))
	r := w.runner(Options{KeepProviderConfig: true})
	r.SetProviderConfigs(applied)
	load(t, ctx, r) // validates the files, as watch's reload does
	if got := scaleOf(t, r); got != 7 {
		t.Fatalf("after loading files not applied, scale = %v, want the given 7", got)
	}
}
