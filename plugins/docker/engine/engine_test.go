package engine_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/infrakit/infrakit/plugins/docker/dockertest"
	"github.com/infrakit/infrakit/plugins/docker/engine"
)

// image is the web image this package's tests run; "" when Docker is not
// usable here (skipReason says why).
var (
	client     *engine.Client
	image      string
	skipReason string
)

func TestMain(m *testing.M) {
	code := func() int {
		c, err := dockertest.Client()
		if err != nil {
			skipReason = err.Error()
			return m.Run()
		}
		defer c.Close()
		client = c
		tag := dockertest.Tag("engine")
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := dockertest.BuildWebImage(ctx, c, tag); err != nil {
			fmt.Fprintln(os.Stderr, "build the test image:", err)
			return 1
		}
		image = tag
		code := m.Run()
		if err := c.ImageRemove(context.Background(), tag, true); err != nil {
			fmt.Fprintln(os.Stderr, "remove the test image:", err)
		}
		return code
	}()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func needDocker(t *testing.T) {
	t.Helper()
	if client == nil {
		t.Skip("skipping: " + skipReason)
	}
}

func TestNegotiate(t *testing.T) {
	for _, tc := range []struct {
		server, want, err string
	}{
		{server: "1.41", want: "1.41"},
		{server: "1.43", want: "1.43"},
		{server: "1.47", want: "1.47"},
		{server: "1.51", want: engine.MaxAPIVersion},
		{server: "2.0", want: engine.MaxAPIVersion},
		{server: "1.40", err: "needs 1.41"},
		{server: "1.9", err: "needs 1.41"},
		{server: "one", err: "not a version"},
		{server: "", err: "not a version"},
	} {
		got, err := engine.Negotiate(tc.server)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Negotiate(%q) = %q, %v; want an error containing %q", tc.server, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Negotiate(%q) = %q, %v; want %q", tc.server, got, err, tc.want)
		}
	}
}

func TestNewHosts(t *testing.T) {
	for host, ok := range map[string]bool{
		"":                            true,
		"unix:///var/run/docker.sock": true,
		"tcp://127.0.0.1:2375":        true,
		"unix://":                     false,
		"tcp://":                      false,
		"ssh://me@host":               false,
		"https://host:2376":           false,
	} {
		c, err := engine.New(engine.Config{Host: host})
		if (err == nil) != ok {
			t.Errorf("New(%q): error %v; want ok=%v", host, err, ok)
		}
		if c != nil {
			c.Close()
		}
	}
}

// An Engine that is not there fails a call at once, naming where it looked.
func TestUnreachable(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "absent.sock")
	c, err := engine.New(engine.Config{Host: "unix://" + sock})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	_, err = c.ContainerList(t.Context(), nil)
	if err == nil || !strings.Contains(err.Error(), "cannot reach the engine at unix://"+sock) {
		t.Fatalf("list on an absent socket: %v; want an error naming the socket", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("failing took %v", d)
	}
}

// An Engine that accepts but never answers makes a call fail after the
// Client's timeout: nothing hangs.
func TestTimeout(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "mute.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, conn) // read nothing, answer nothing
		}
	}()
	c, err := engine.New(engine.Config{Host: "unix://" + sock, Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	_, err = c.ServerVersion(t.Context())
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("version from a mute engine: %v; want a deadline error", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("timing out took %v; the timeout is 200ms", d)
	}
	// The event stream's answer has the same deadline.
	if _, err := c.Events(t.Context(), nil, time.Time{}); err == nil {
		t.Fatal("events from a mute engine: no error")
	}
	ln.Close()
	<-accepted
}

func randomHex() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// TestLifecycle walks one container through the calls the provider makes,
// with an event stream open, against the real Engine.
func TestLifecycle(t *testing.T) {
	needDocker(t)
	ctx := t.Context()
	run := "engine-test-" + randomHex()
	label := "infrakit-test.run=" + run
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := dockertest.RemoveLabelled(ctx, client, label); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})

	v, err := client.APIVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("API version %s", v)

	stream, err := client.Events(ctx, engine.Filters{"type": {"container"}, "label": {label}}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	events := make(chan engine.Event, 32)
	go func() {
		defer close(events)
		for {
			e, err := stream.Next()
			if err != nil {
				return
			}
			events <- e
		}
	}()
	await := func(action string) engine.Event {
		t.Helper()
		timeout := time.After(5 * time.Second)
		for {
			select {
			case e, ok := <-events:
				if !ok {
					t.Fatalf("event stream ended before %q", action)
				}
				if e.Action == action {
					return e
				}
			case <-timeout:
				t.Fatalf("no %q event within 5s", action)
			}
		}
	}

	if present, err := client.ImageInspect(ctx, image); err != nil || !present {
		t.Fatalf("ImageInspect(%q) = %v, %v; want present", image, present, err)
	}
	if present, err := client.ImageInspect(ctx, "infrakit-absent-image:"+run); err != nil || present {
		t.Fatalf("ImageInspect(absent) = %v, %v; want absent", present, err)
	}
	_, err = client.ContainerCreate(ctx, "", engine.ContainerConfig{Image: "infrakit-absent-image:" + run, Labels: map[string]string{"infrakit-test.run": run}})
	if !engine.IsNotFound(err) {
		t.Fatalf("create from an absent image: %v; want a 404 (it must not pull)", err)
	}

	stop := 1
	created, err := client.ContainerCreate(ctx, "infrakit-engine-test-"+run, engine.ContainerConfig{
		Image:       image,
		Env:         []string{"PORT=8081"},
		Labels:      map[string]string{"infrakit-test.run": run, "other": "x=y"},
		StopTimeout: &stop,
		HostConfig:  engine.HostConfig{NetworkMode: "bridge", Memory: 32 << 20},
	})
	if err != nil {
		t.Fatal(err)
	}
	if e := await("create"); e.Actor.ID != created.ID || e.Actor.Attributes["other"] != "x=y" {
		t.Errorf("create event %+v; want actor %s with its labels", e, created.ID)
	}
	if _, err := client.ContainerCreate(ctx, "infrakit-engine-test-"+run, engine.ContainerConfig{Image: image}); !engine.IsConflict(err) {
		t.Errorf("create with a name in use: %v; want a 409", err)
	}
	if err := client.ContainerStart(ctx, created.ID); err != nil {
		t.Fatal(err)
	}
	await("start")
	if err := client.ContainerStart(ctx, created.ID); err != nil {
		t.Errorf("starting a running container: %v; want no error", err)
	}

	list, err := client.ContainerList(ctx, engine.Filters{"label": {label}})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].ID != created.ID || list[0].State != "running" {
		t.Fatalf("list by label: %+v; want the one running container", list)
	}
	if ip := list[0].NetworkSettings.Networks["bridge"].IPAddress; net.ParseIP(ip) == nil {
		t.Errorf("listed bridge IP %q", ip)
	}
	if list[0].HostConfig.NetworkMode != "bridge" {
		t.Errorf("listed network mode %q", list[0].HostConfig.NetworkMode)
	}
	in, err := client.ContainerInspect(ctx, created.ID[:12])
	if err != nil {
		t.Fatal(err)
	}
	if in.ID != created.ID || in.Config.StopTimeout == nil || *in.Config.StopTimeout != 1 || !in.State.Running {
		t.Errorf("inspect by short ID: %+v", in)
	}

	if err := client.ContainerKill(ctx, created.ID, "KILL"); err != nil {
		t.Fatal(err)
	}
	await("die")
	if err := client.ContainerStop(ctx, created.ID, time.Second); err != nil {
		t.Errorf("stopping a stopped container: %v; want no error", err)
	}
	if err := client.ContainerRemove(ctx, created.ID, true); err != nil {
		t.Fatal(err)
	}
	await("destroy")
	if err := client.ContainerRemove(ctx, created.ID, true); !engine.IsNotFound(err) {
		t.Errorf("removing a removed container: %v; want a 404", err)
	}
	if _, err := client.ContainerInspect(ctx, created.ID); !engine.IsNotFound(err) {
		t.Errorf("inspecting a removed container: %v; want a 404", err)
	}
	stream.Close()
	for range events {
	}
}
