// Package dockertest is what the tests of the docker provider, and those
// that run testdata/docker's stack (e2e, bench), share: finding the Engine
// (or a reason to skip), building the web image FROM scratch around the
// static testdata/docker/webserver binary (no registry needed), the stack
// rewritten for one test, and removing the containers a test made, by
// label.
package dockertest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/infrakit/infrakit/plugins/docker/engine"
)

// WebImage is the repository of the web image; tests tag it per package
// (WebImage + ":" + package) so one package removing its tag never pulls
// the image from under another running at the same time.
const WebImage = "infrakit-docker-web"

// Tag is this test process's tag of the web image for purpose
// ("conformance", "engine"): a tag names one image, so two test runs
// beside each other (two checkouts, one Docker) that shared one would
// remove or replace each other's.
func Tag(purpose string) string { return fmt.Sprintf("%s:%s-test-%d", WebImage, purpose, os.Getpid()) }

// RunLabel is a label value naming this test process, for cleanups that
// must remove only what this run made.
func RunLabel() string { return fmt.Sprintf("run-%d", os.Getpid()) }

// Client returns an Engine client for $DOCKER_HOST (default the local
// socket), or an error saying why Docker cannot be used here: tests skip
// with it.
func Client() (*engine.Client, error) {
	c, err := engine.New(engine.Config{Host: os.Getenv("DOCKER_HOST"), Timeout: 30 * time.Second})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.APIVersion(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("no usable Docker Engine (is /var/run/docker.sock there, or DOCKER_HOST set?): %w", err)
	}
	return c, nil
}

// ModuleRoot is the directory of the go.mod of the module holding the
// working directory.
func ModuleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("not inside a Go module")
	}
	return filepath.Dir(gomod), nil
}

// BuildWebImage builds testdata/docker/webserver as a static binary
// (CGO_ENABLED=0) and the image tag from testdata/docker/Dockerfile
// (FROM scratch) through the Engine API.
func BuildWebImage(ctx context.Context, c *engine.Client, tag string) error {
	root, err := ModuleRoot()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "infrakit-docker-web-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "webserver")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./testdata/docker/webserver")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build testdata/docker/webserver: %w\n%s", err, stderr.String())
	}
	dockerfile, err := os.ReadFile(filepath.Join(root, "testdata", "docker", "Dockerfile"))
	if err != nil {
		return err
	}
	binary, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	// Test packages run in parallel and build the same bytes, which would
	// make the same image: one package removing its tag at the end could
	// then delete the image another is in the middle of tagging. A label
	// naming this build makes each package's image its own (the layers are
	// still shared).
	dockerfile = fmt.Appendf(dockerfile, "\nLABEL infrakit.test.build=%q\n", fmt.Sprintf("%s-%d", tag, os.Getpid()))
	return c.ImageBuild(ctx, tag, []engine.File{
		{Name: "Dockerfile", Mode: 0o644, Data: dockerfile},
		{Name: "webserver", Mode: 0o755, Data: binary},
	})
}

// RemoveLabelled force-removes every container carrying label ("k=v" or
// "k") and returns how many there were. It returns once none is listed any
// more (or ctx ends): a container being removed already (a conflict, as
// when Docker auto-removes one that was killed) is still listed for a
// moment, and a caller checking next for leftovers must not count it.
func RemoveLabelled(ctx context.Context, c *engine.Client, label string) (int, error) {
	filter := engine.Filters{"label": {label}}
	cs, err := c.ContainerList(ctx, filter)
	if err != nil {
		return 0, err
	}
	n := len(cs)
	for _, ct := range cs {
		if err := c.ContainerRemove(ctx, ct.ID, true); err != nil && !engine.IsNotFound(err) && !engine.IsConflict(err) {
			return n, err
		}
	}
	for len(cs) > 0 {
		select {
		case <-ctx.Done():
			return n, fmt.Errorf("%d containers labelled %s still listed after their removal: %w", len(cs), label, context.Cause(ctx))
		case <-time.After(50 * time.Millisecond):
		}
		if cs, err = c.ContainerList(ctx, filter); err != nil {
			return n, err
		}
	}
	return n, nil
}

// StackOptions make testdata/docker/stack.hcl a test's own: its stack name
// (which labels its containers), the web image's tag, the Docker network
// the containers join and HAProxy's lb_port; Size, when set, is the
// group's size instead of 3.
type StackOptions struct {
	Stack, Image, Network string
	LBPort, Size          int
}

// Stack is testdata/docker/stack.hcl rewritten with o. It fails when the
// file no longer holds once what it rewrites: the caller's test would
// otherwise run on the shared defaults.
func Stack(o StackOptions) (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	src, err := os.ReadFile(filepath.Join(root, "testdata", "docker", "stack.hcl"))
	if err != nil {
		return "", err
	}
	rewrites := [][2]string{
		{`stack "docker" {}`, fmt.Sprintf("stack %q {}", o.Stack)},
		{`"infrakit-docker-web:latest"`, strconv.Quote(o.Image)},
		{`memory = "32m"`, fmt.Sprintf("memory = \"32m\"\n      network = %q", o.Network)},
		{`lb_port     = 18080`, fmt.Sprintf("lb_port     = %d", o.LBPort)},
	}
	if o.Size > 0 {
		rewrites = append(rewrites, [2]string{`size = 3`, fmt.Sprintf("size = %d", o.Size)})
	}
	stack := string(src)
	for _, r := range rewrites {
		if strings.Count(stack, r[0]) != 1 {
			return "", fmt.Errorf("testdata/docker/stack.hcl no longer holds %s once; update dockertest.Stack", r[0])
		}
		stack = strings.Replace(stack, r[0], r[1], 1)
	}
	return stack, nil
}
