package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// TestBenchEtcdClusterKill measures, on testdata/etcd-cluster's stack (3
// etcd members as pets on Docker, the etcdmember flavor) with `infrakit
// watch` running with default settings but a mass-failure brake settle of
// 5 s: a member killed with `docker kill` until the cluster is 3 started,
// healthy members again (the member list through etcd's client, and a
// linearizable read through each member), the dead one removed and its
// replacement at the same address. Median of 5. Kills are one settle time
// apart: with watch's default 30 s, three kills in a row within it are a
// mass failure of the group, and the brake rightly holds the third.
func TestBenchEtcdClusterKill(t *testing.T) {
	enabled(t)
	const runs = 5
	if out, err := exec.Command("docker", "version", "--format", "{{.Server.Version}}").CombinedOutput(); err != nil {
		t.Skipf("no Docker Engine answers: %v %s", err, out)
	}
	b := newEtcdBench(t)
	b.infrakit("init", "-plugin-dir", b.bin)
	b.infrakit("apply", "-auto-approve")
	b.waitHealthy("apply", "")
	b.watch()

	var took []time.Duration
	for i := range runs {
		if i > 0 {
			time.Sleep(brakeSettle + time.Second) // one death per settle time
		}
		victim := b.lids[i%len(b.lids)]
		before := b.containerOf(victim)
		start := time.Now()
		if out, err := exec.Command("docker", "kill", before).CombinedOutput(); err != nil {
			t.Fatalf("docker kill %s: %v\n%s", before, err, out)
		}
		d := b.waitHealthy(fmt.Sprintf("run %d", i), before)
		took = append(took, d)
		t.Logf("run %d: member %s (container %s) killed; 3 healthy members after %s", i, victim, before, ms(time.Since(start)))
	}
	sorted := slices.Clone(took)
	slices.Sort(sorted)
	var out strings.Builder
	fmt.Fprintf(&out, "etcd cluster: docker kill of a member -> 3 healthy started members again, testdata/etcd-cluster stack, watch defaults with -brake-settle 5s, %d runs\n", runs)
	fmt.Fprintf(&out, "median: %s\n", ms(sorted[len(sorted)/2]))
	fmt.Fprintf(&out, "all:    %s\n", joinMS(took))
	t.Log("\n" + out.String())
	fmt.Print(out.String())
}

// brakeSettle is the benchmark's watch -brake-settle.
const brakeSettle = 5 * time.Second

// etcdBench is the stack directory of the etcd benchmark and what it made:
// binaries, an image, a network of its own; removed when it ends.
type etcdBench struct {
	t                     *testing.T
	bin, dir              string
	stack, image, network string
	lids                  []string
}

func newEtcdBench(t *testing.T) *etcdBench {
	t.Helper()
	var s [4]byte
	_, _ = rand.Read(s[:])
	suffix := hex.EncodeToString(s[:])
	b := &etcdBench{t: t, dir: t.TempDir(), stack: "bench-etcd-" + suffix, image: "infrakit-etcd:bench-" + suffix, network: "ik-bench-etcd-" + suffix}
	b.bin = t.TempDir()
	for pkg, name := range map[string]string{
		"github.com/infrakit/infrakit":                    "infrakit",
		"github.com/infrakit/infrakit/plugins/docker":     "infrakit-provider-docker",
		"github.com/infrakit/infrakit/plugins/etcdmember": "infrakit-provider-etcdmember",
	} {
		if out, err := exec.Command("go", "build", "-o", filepath.Join(b.bin, name), pkg).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	if out, err := exec.Command("bash", "../testdata/etcd-cluster/build-image.sh", b.image).CombinedOutput(); err != nil {
		t.Fatalf("build the etcd image: %v\n%s", err, out)
	}
	t.Cleanup(func() { b.docker("rmi", "-f", b.image) })
	prefix := ""
	for try := 0; ; try++ {
		n, _ := rand.Int(rand.Reader, big.NewInt(64))
		prefix = fmt.Sprintf("10.213.%d", 192+n.Int64())
		out, err := exec.Command("docker", "network", "create", "--subnet", prefix+".0/24", "--label", "infrakit.bench="+b.stack, b.network).CombinedOutput()
		if err == nil {
			break
		}
		if try == 7 {
			t.Fatalf("docker network create: %v\n%s", err, out)
		}
	}
	t.Cleanup(func() { b.docker("network", "rm", b.network) })
	t.Cleanup(b.removeContainers)
	for i := range 3 {
		b.lids = append(b.lids, fmt.Sprintf("%s.%d", prefix, 11+i))
	}
	src, err := os.ReadFile("../testdata/etcd-cluster/stack.hcl")
	if err != nil {
		t.Fatal(err)
	}
	stack := string(src)
	for _, r := range [][2]string{
		{`stack "etcd" {}`, fmt.Sprintf("stack %q {}", b.stack)},
		{`logical_ids = ["10.213.40.11", "10.213.40.12", "10.213.40.13"]`, fmt.Sprintf("logical_ids = [%q, %q, %q]", b.lids[0], b.lids[1], b.lids[2])},
		{`"infrakit-etcd:latest"`, fmt.Sprintf("%q", b.image)},
		{`network  = "infrakit-etcd"`, fmt.Sprintf("network  = %q", b.network)},
	} {
		if strings.Count(stack, r[0]) != 1 {
			t.Fatalf("testdata/etcd-cluster/stack.hcl no longer holds %s once", r[0])
		}
		stack = strings.Replace(stack, r[0], r[1], 1)
	}
	if err := os.WriteFile(filepath.Join(b.dir, "stack.hcl"), []byte(stack), 0o644); err != nil {
		t.Fatal(err)
	}
	return b
}

func (b *etcdBench) docker(args ...string) string {
	out, err := exec.Command("docker", args...).CombinedOutput()
	if err != nil {
		b.t.Logf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (b *etcdBench) removeContainers() {
	if ids := strings.Fields(b.docker("ps", "-aq", "--filter", "label=infrakit.stack="+b.stack)); len(ids) > 0 {
		b.docker(append([]string{"rm", "-f"}, ids...)...)
	}
}

// containerOf is the running container of the member at lid ("" when none).
func (b *etcdBench) containerOf(lid string) string {
	return strings.TrimSpace(b.docker("ps", "-q", "--filter", "label=infrakit.stack="+b.stack,
		"--filter", "label=infrakit.logical_id="+lid, "--filter", "status=running"))
}

func (b *etcdBench) infrakit(args ...string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(b.bin, "infrakit"), args...)
	cmd.Dir = b.dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		b.t.Fatalf("infrakit %s: %v\n%s", strings.Join(args, " "), err, tail(out.String(), 4000))
	}
}

// watch runs `infrakit watch` with its defaults until the benchmark ends.
func (b *etcdBench) watch() {
	b.t.Helper()
	log, err := os.Create(filepath.Join(b.dir, "watch.log"))
	if err != nil {
		b.t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(b.bin, "infrakit"), "watch", "-listen", "127.0.0.1:0", "-brake-settle", brakeSettle.String())
	cmd.Dir = b.dir
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		log.Close()
	})
}

// waitHealthy waits until the cluster is 3 started, healthy members at the
// pets' addresses, run by 3 containers none of which is gone (the killed
// one), and returns how long that took.
func (b *etcdBench) waitHealthy(what, gone string) time.Duration {
	b.t.Helper()
	start := time.Now()
	for deadline := start.Add(3 * time.Minute); !b.healthy(gone); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(b.dir, "watch.log"))
			b.t.Fatalf("%s: the cluster is not 3 healthy members within 3 minutes\n%s", what, tail(string(log), 4000))
		}
	}
	return time.Since(start)
}

func (b *etcdBench) healthy(gone string) bool {
	urls := make([]string, len(b.lids))
	for i, id := range b.lids {
		urls[i] = "http://" + id + ":2379"
		if c := b.containerOf(id); c == "" || c == gone {
			return false
		}
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: urls, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		return false
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := c.MemberList(ctx)
	if err != nil || len(resp.Members) != 3 {
		return false
	}
	for _, m := range resp.Members {
		if m.Name == "" || len(m.ClientURLs) == 0 || m.IsLearner || !slices.Contains(urls, m.ClientURLs[0]) {
			return false
		}
		one, err := clientv3.New(clientv3.Config{Endpoints: m.ClientURLs[:1], DialTimeout: time.Second, Logger: zap.NewNop()})
		if err != nil {
			return false
		}
		_, err = one.Get(ctx, "health")
		one.Close()
		if err != nil {
			return false
		}
	}
	return true
}
