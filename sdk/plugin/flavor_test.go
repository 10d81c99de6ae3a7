package plugin

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/infrakit/infrakit/internal/syncbuf"
	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
	pb "github.com/infrakit/infrakit/sdk/proto/infrakit/provider/v1"
	"github.com/infrakit/infrakit/sdk/provider"
)

// The test binary doubles as the flavor providers of these tests: with
// envFlavorProvider set, init serves them (and never returns), so the
// tests run the real go-plugin subprocess and gRPC path.
//
//	current  serves "batched" (implements flavor.BatchHealthChecker) and
//	         "plain" (Healthy only) with this SDK
//	old      serves "plain" on a Flavor service without HealthyBatch and
//	         PrepareBatch, as a provider built before the RPCs existed
//
// The flavors append what they were asked to the file envFlavorLog names:
// "batch N" per HealthyAll of N instances, "healthy K" per Healthy call,
// K being how many Healthy calls were in flight then, "prepare S" per
// Prepare of the member of sequence S.
const (
	envFlavorProvider = "PLUGIN_TEST_FLAVOR_PROVIDER"
	envFlavorLog      = "PLUGIN_TEST_FLAVOR_LOG"
)

func init() {
	mode := os.Getenv(envFlavorProvider)
	if mode == "" {
		return
	}
	rec := &callLog{path: os.Getenv(envFlavorLog)}
	flavors := map[string]flavor.Plugin{
		"batched": &batchedFlavor{plainFlavor: plainFlavor{rec: rec}},
		"plain":   &plainFlavor{rec: rec},
	}
	if mode == "current" {
		Serve(&ServeConfig{Metadata: provider.Metadata{Name: "flavors", Version: "1.0.0"}, Flavors: flavors})
	}
	// As a provider built before HealthyBatch: the method is not in its
	// Flavor service's description.
	serveOld(&ServeConfig{Metadata: provider.Metadata{Name: "flavors", Version: "0.9.0"}, Flavors: flavors}, func(s *grpc.Server, srv *server) {
		pb.RegisterProviderServer(s, providerServer{s: srv})
		desc := pb.Flavor_ServiceDesc
		desc.Methods = slices.DeleteFunc(slices.Clone(desc.Methods), func(m grpc.MethodDesc) bool {
			return m.MethodName == "HealthyBatch" || m.MethodName == "PrepareBatch"
		})
		s.RegisterService(&desc, flavorServer{s: srv})
	})
}

// callLog appends lines to a file shared with the test.
type callLog struct {
	path string
	mu   sync.Mutex
}

func (l *callLog) add(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		panic(err)
	}
	fmt.Fprintf(f, format+"\n", args...)
	f.Close()
}

// plainFlavor answers each instance's "health" tag ("fail": an error,
// "slow": healthy after a few milliseconds); properties {"bad": ...} are an
// error diagnostic at bad.
type plainFlavor struct {
	rec      *callLog
	mu       sync.Mutex
	inFlight int
}

func (*plainFlavor) Validate(context.Context, json.RawMessage, flavor.Allocation) error { return nil }

// Prepare tags the spec with its index; a spec tagged prepare=fail fails.
func (f *plainFlavor) Prepare(_ context.Context, _ json.RawMessage, s instance.Spec, _ flavor.Allocation, i flavor.Index) (instance.Spec, error) {
	f.rec.add("prepare %d", i.Sequence)
	if s.Tags["prepare"] == "fail" {
		return s, fmt.Errorf("no spec for %d", i.Sequence)
	}
	s.Tags = map[string]string{"sequence": strconv.FormatUint(i.Sequence, 10)}
	return s, nil
}

func (*plainFlavor) Drain(context.Context, json.RawMessage, instance.Description) error { return nil }

func (f *plainFlavor) Healthy(_ context.Context, props json.RawMessage, inst instance.Description) (flavor.Health, error) {
	// Healthy may do as it likes with its input: it has its own tags, which
	// no other call marked.
	f.mu.Lock()
	if inst.Tags != nil {
		if _, marked := inst.Tags["seen-by"]; marked {
			f.mu.Unlock()
			return "", fmt.Errorf("%s: tags shared with another call", inst.ID)
		}
		inst.Tags["seen-by"] = "plain"
	}
	f.inFlight++
	f.rec.add("healthy %d", f.inFlight)
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inFlight--
		f.mu.Unlock()
	}()
	return tagHealth(props, inst)
}

func tagHealth(props json.RawMessage, inst instance.Description) (flavor.Health, error) {
	var p map[string]any
	_ = json.Unmarshal(props, &p)
	if _, bad := p["bad"]; bad {
		return "", provider.AttributeError("Invalid value", "bad is not allowed", "bad")
	}
	switch h := inst.Tags["health"]; h {
	case "fail":
		return "", fmt.Errorf("probe of %s failed", inst.ID)
	case "slow":
		time.Sleep(3 * time.Millisecond)
		return flavor.HealthHealthy, nil
	case "unsupported":
		return "", fmt.Errorf("no health here: %w", errors.ErrUnsupported)
	default:
		return flavor.Health(h), nil
	}
}

// batchedFlavor also answers batches; properties {"unsupported": true}
// make HealthyAll decline with errors.ErrUnsupported.
type batchedFlavor struct{ plainFlavor }

func (f *batchedFlavor) HealthyAll(_ context.Context, props json.RawMessage, insts []instance.Description) ([]flavor.Health, error) {
	f.rec.add("batch %d", len(insts))
	if strings.Contains(string(props), "unsupported") {
		return nil, fmt.Errorf("not today: %w", errors.ErrUnsupported)
	}
	out := make([]flavor.Health, len(insts))
	for i, inst := range insts {
		if inst.Tags["infrakit.group"] != "g" {
			return nil, fmt.Errorf("instance %s arrived without its tags: %v", inst.ID, inst.Tags)
		}
		h, err := tagHealth(props, inst)
		if err != nil {
			return nil, err
		}
		out[i] = h
	}
	return out, nil
}

// startFlavors starts the test binary as a flavor provider in mode and
// returns its client, the host's log and a reader of the calls log.
func startFlavors(t *testing.T, mode string) (*Client, *syncbuf.Buffer, func() []string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	calls := filepath.Join(t.TempDir(), "calls")
	c, logs := startTest(t, "", func(cfg *ClientConfig) {
		cfg.Path = exe
		cfg.Env = []string{envFlavorProvider + "=" + mode, envFlavorLog + "=" + calls}
	})
	read := func() []string {
		f, err := os.Open(calls)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var lines []string
		for sc := bufio.NewScanner(f); sc.Scan(); {
			lines = append(lines, sc.Text())
		}
		if err := os.Remove(calls); err != nil {
			t.Fatal(err)
		}
		return lines
	}
	return c, logs, read
}

// batchSizes are the sizes of the "batch N" lines; healthyCalls counts the
// "healthy K" lines and returns the largest K.
func batchSizes(lines []string) []int {
	var out []int
	for _, l := range lines {
		if n, ok := strings.CutPrefix(l, "batch "); ok {
			v, _ := strconv.Atoi(n)
			out = append(out, v)
		}
	}
	return out
}

func healthyCalls(lines []string) (calls, maxInFlight int) {
	for _, l := range lines {
		if k, ok := strings.CutPrefix(l, "healthy "); ok {
			v, _ := strconv.Atoi(k)
			calls, maxInFlight = calls+1, max(maxInFlight, v)
		}
	}
	return calls, maxInFlight
}

// members returns n running descriptions whose health tags cycle through
// cycle; it also returns the healths expected back.
func members(n int, cycle ...string) ([]instance.Description, []flavor.Health) {
	descs := make([]instance.Description, n)
	want := make([]flavor.Health, n)
	for i := range descs {
		h := cycle[i%len(cycle)]
		descs[i] = instance.Description{
			ID: instance.ID(fmt.Sprintf("i-%05d", i)), State: instance.StateRunning, Address: "10.0.0.1",
			Tags: map[string]string{"health": h, "infrakit.group": "g"},
		}
		switch h {
		case "fail", "":
			want[i] = flavor.HealthUnknown
		case "slow":
			want[i] = flavor.HealthHealthy
		default:
			want[i] = flavor.Health(h)
		}
	}
	return descs, want
}

func batch(t *testing.T, c *Client, typ string) flavor.BatchHealthChecker {
	t.Helper()
	b, ok := c.Flavor(typ).(flavor.BatchHealthChecker)
	if !ok {
		t.Fatalf("the client's flavor %T is not a flavor.BatchHealthChecker", c.Flavor(typ))
	}
	return b
}

func TestHealthyAllNative(t *testing.T) {
	c, _, calls := startFlavors(t, "current")
	ctx := ctxT(t)
	b := batch(t, c, "batched")

	if hs, err := b.HealthyAll(ctx, nil, nil); err != nil || len(hs) != 0 || calls() != nil {
		t.Fatalf("empty batch: %v, %v; want nothing asked", hs, err)
	}

	// In calls of at most 1,000 instances, answered in order.
	descs, want := members(2500, "healthy", "unhealthy", "unknown", "")
	hs, err := b.HealthyAll(ctx, nil, descs)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(hs, want) {
		t.Fatalf("healths differ from what the provider answered per instance")
	}
	if got := batchSizes(calls()); !slices.Equal(got, []int{1000, 1000, 500}) {
		t.Fatalf("batches of %v, want [1000 1000 500]", got)
	}

	// Tags every instance carries travel once per call (common_tags); the
	// provider still sees each instance's full set.
	descs, want = members(5, "unhealthy")
	if hs, err = b.HealthyAll(ctx, nil, descs); err != nil || !slices.Equal(hs, want) {
		t.Fatalf("instances with the same tags: %v, %v", hs, err)
	}
	if got := batchSizes(calls()); !slices.Equal(got, []int{5}) {
		t.Fatalf("batches of %v, want [5]", got)
	}
	if hs, err = b.HealthyAll(ctx, nil, descs[:1]); err != nil || !slices.Equal(hs, want[:1]) {
		t.Fatalf("one instance: %v, %v", hs, err)
	}
	calls()

	// Large descriptions: a call carries about 1 MiB at most.
	descs, want = members(600, "healthy", "unhealthy")
	big := strings.Repeat("x", 4096)
	for i := range descs {
		descs[i].Tags["note"] = big + strconv.Itoa(i)
	}
	if hs, err = b.HealthyAll(ctx, nil, descs); err != nil || !slices.Equal(hs, want) {
		t.Fatalf("large descriptions: %v", err)
	}
	sizes := batchSizes(calls())
	sum := 0
	for _, n := range sizes {
		sum += n
		if n*4096 > maxBatchBytes {
			t.Errorf("a batch of %d descriptions of over 4 KiB each: over %d bytes", n, maxBatchBytes)
		}
	}
	if sum != 600 || len(sizes) < 3 {
		t.Fatalf("batches %v: want 600 descriptions over at least 3 calls", sizes)
	}

	// A failing batch fails as a whole, with the provider's diagnostics.
	_, err = b.HealthyAll(ctx, json.RawMessage(`{"bad": 1}`), descs[:3])
	wantDiagnostics(t, err, "HealthyBatch", provider.AttributeError("Invalid value", "bad is not allowed", "bad"))

	// A flavor returning a health the wire does not know fails the batch.
	descs, _ = members(3, "healthy", "bogus")
	_, err = b.HealthyAll(ctx, nil, descs)
	wantError(t, err, `provider "test": HealthyBatch: provider returned an invalid result: instance "i-00001": unknown health "bogus" (want healthy, unhealthy or unknown)`)
}

// A flavor without HealthyAll (or whose HealthyAll declines) is asked one
// instance at a time inside the provider, with bounded parallelism: still
// one round trip per batch.
func TestHealthyAllInProvider(t *testing.T) {
	c, logs, calls := startFlavors(t, "current")
	ctx := ctxT(t)

	descs, want := members(300, "slow", "unhealthy", "unknown", "healthy")
	hs, err := batch(t, c, "plain").HealthyAll(ctx, nil, descs)
	if err != nil || !slices.Equal(hs, want) {
		t.Fatalf("plain: %v; healths equal: %v", err, slices.Equal(hs, want))
	}
	n, most := healthyCalls(calls())
	if n != 300 || most > flavor.DefaultHealthParallelism || most < 2 {
		t.Fatalf("%d Healthy calls, at most %d at once; want 300, 2..%d at once", n, most, flavor.DefaultHealthParallelism)
	}

	// Instances with only tags they all share: the provider gets them
	// once, and each Healthy call its own copy to do with as it likes.
	same, sameWant := members(200, "slow")
	if hs, err = batch(t, c, "plain").HealthyAll(ctx, nil, same); err != nil || !slices.Equal(hs, sameWant) {
		t.Fatalf("plain, shared tags: %v, %v; want all healthy", hs[:min(len(hs), 3)], err)
	}
	if n, _ := healthyCalls(calls()); n != 200 {
		t.Fatalf("%d Healthy calls, want 200", n)
	}

	hs, err = batch(t, c, "batched").HealthyAll(ctx, json.RawMessage(`{"unsupported": true}`), descs)
	if err != nil || !slices.Equal(hs, want) {
		t.Fatalf("declined batch: %v", err)
	}
	lines := calls()
	if n, _ := healthyCalls(lines); n != 300 || !slices.Equal(batchSizes(lines), []int{300}) {
		t.Fatalf("declined batch: calls %v..., want one batch then 300 Healthy", lines[:3])
	}

	// Some calls fail: those instances are unknown, and a warning says so.
	descs, want = members(10, "healthy", "unhealthy", "fail", "healthy", "unhealthy")
	hs, err = batch(t, c, "plain").HealthyAll(ctx, nil, descs)
	if err != nil || !slices.Equal(hs, want) {
		t.Fatalf("partial failure: %v, %v; want %v", hs, err, want)
	}
	if !strings.Contains(logs.String(), "health of 2 of 10 instances is unknown: the check failed") ||
		!strings.Contains(logs.String(), "i-00002: probe of i-00002 failed") {
		t.Fatalf("no warning about the failed checks in the host log:\n%s", logs.String())
	}

	// Every call fails: the batch fails, as each call would have.
	_, err = batch(t, c, "plain").HealthyAll(ctx, json.RawMessage(`{"bad": true}`), descs)
	wantDiagnostics(t, err, "HealthyBatch", provider.AttributeError("Invalid value", "bad is not allowed", "bad"))
	descs, _ = members(4, "fail")
	_, err = batch(t, c, "plain").HealthyAll(ctx, nil, descs)
	wantError(t, err, `provider "test": HealthyBatch: probe of i-00000 failed`)

	// A flavor that cannot judge health at all fails the batch like any
	// other error: UNIMPLEMENTED is kept for providers without the RPC.
	descs, _ = members(2, "unsupported")
	_, err = batch(t, c, "plain").HealthyAll(ctx, nil, descs)
	wantError(t, err, `provider "test": HealthyBatch: no health here: unsupported operation`)
	if unsupported(c, "HealthyBatch") || strings.Contains(logs.String(), "does not serve HealthyBatch") {
		t.Fatal("a current provider was taken for one without HealthyBatch")
	}
}

// A provider built before HealthyBatch answers UNIMPLEMENTED: the host
// asks Healthy per instance, and remembers not to try the batch again.
func TestHealthyAllOldProvider(t *testing.T) {
	c, logs, calls := startFlavors(t, "old")
	ctx := ctxT(t)
	b := batch(t, c, "plain")
	for range 2 {
		descs, want := members(50, "healthy", "unhealthy", "unknown", "fail")
		hs, err := b.HealthyAll(ctx, nil, descs)
		if err != nil || !slices.Equal(hs, want) {
			t.Fatalf("old provider: %v, %v", hs, err)
		}
		if n, most := healthyCalls(calls()); n != 50 || most > flavor.DefaultHealthParallelism {
			t.Fatalf("%d Healthy calls, %d at once; want 50, at most %d", n, most, flavor.DefaultHealthParallelism)
		}
	}
	if n := strings.Count(logs.String(), "does not serve HealthyBatch"); n != 1 {
		t.Fatalf("the fallback was found %d times, want once (then remembered):\n%s", n, logs.String())
	}
	if !unsupported(c, "HealthyBatch") {
		t.Fatal("the client does not remember that the provider lacks HealthyBatch")
	}
	// Single Healthy calls still work as they always did.
	if h, err := c.Flavor("plain").Healthy(ctx, nil, instance.Description{ID: "x", Tags: map[string]string{"health": "unhealthy"}}); err != nil || h != flavor.HealthUnhealthy {
		t.Fatalf("Healthy: %s, %v", h, err)
	}
	descs, _ := members(3, "fail")
	_, err := b.HealthyAll(ctx, nil, descs)
	wantError(t, err, `provider "test": Healthy: probe of i-00000 failed`)
}
