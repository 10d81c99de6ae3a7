package container

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/infrakit/infrakit/sdk/provider"
)

func TestParseValid(t *testing.T) {
	for _, tc := range []struct {
		name string
		raw  string
		want Properties
	}{
		{
			name: "defaults",
			raw:  `{"image": "web:1"}`,
			want: Properties{Image: "web:1", Network: "bridge", Restart: Restart{Name: "no"}, StopTimeout: 5 * time.Second},
		},
		{
			name: "everything",
			raw: `{
				"image": "registry.example.com/team/web@sha256:abc",
				"command": ["/web", "-v"],
				"env": {"PORT": "8080"},
				"labels": {"com.example.team": "edge"},
				"network": "backend",
				"ports": ["8080", "9090:90/udp", "127.0.0.1:0:7000", 6000],
				"cpus": 0.5,
				"memory": "64m",
				"restart": "on-failure:3",
				"stop_timeout": "1500ms"
			}`,
			want: Properties{
				Image:   "registry.example.com/team/web@sha256:abc",
				Command: []string{"/web", "-v"},
				Env:     map[string]string{"PORT": "8080"},
				Labels:  map[string]string{"com.example.team": "edge"},
				Network: "backend",
				Ports: []Port{
					{ContainerPort: 8080, Proto: "tcp"},
					{ContainerPort: 90, Proto: "udp", Published: true, HostPort: 9090},
					{ContainerPort: 7000, Proto: "tcp", Published: true, HostIP: "127.0.0.1"},
					{ContainerPort: 6000, Proto: "tcp"},
				},
				CPUs:        0.5,
				Memory:      64 << 20,
				Restart:     Restart{Name: "on-failure", MaxRetries: 3},
				StopTimeout: 1500 * time.Millisecond,
			},
		},
		{
			name: "nulls are absent",
			raw:  `{"image": "web", "env": null, "ports": null, "memory": null}`,
			want: Properties{Image: "web", Network: "bridge", Restart: Restart{Name: "no"}, StopTimeout: 5 * time.Second},
		},
		{
			name: "memory in bytes, host network with exposed port",
			raw:  `{"image": "web", "memory": 7340032, "network": "host", "ports": ["80"]}`,
			want: Properties{Image: "web", Network: "host", Memory: 7 << 20, Ports: []Port{{ContainerPort: 80, Proto: "tcp"}},
				Restart: Restart{Name: "no"}, StopTimeout: 5 * time.Second},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(json.RawMessage(tc.raw))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Parse:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestParseInvalid(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		path []string
		text string
	}{
		{`{}`, []string{"image"}, "needs an image"},
		{``, []string{"image"}, "needs an image"},
		{`null`, []string{"image"}, "needs an image"},
		{`["web"]`, nil, "must be an object"},
		{`{"image": 3}`, []string{"image"}, "must be a string"},
		{`{"image": ""}`, []string{"image"}, "must not be empty"},
		{`{"image": "web latest"}`, []string{"image"}, "not an image reference"},
		{`{"image": "web", "colour": "red"}`, []string{"colour"}, `named "colour"`},
		{`{"image": "web", "command": "/web"}`, []string{"command"}, "list of strings"},
		{`{"image": "web", "command": ["/web", 1]}`, []string{"command", "1"}, "must be a string"},
		{`{"image": "web", "env": {"A=B": "1"}}`, []string{"env", "A=B"}, "cannot be an environment variable name"},
		{`{"image": "web", "env": {"INFRAKIT_INIT": "x"}}`, []string{"env", "INFRAKIT_INIT"}, "set by the docker provider"},
		{`{"image": "web", "env": {"PORT": 8080}}`, []string{"env", "PORT"}, "must be a string"},
		{`{"image": "web", "labels": {"infrakit.group": "x"}}`, []string{"labels", "infrakit.group"}, "Reserved label"},
		{`{"image": "web", "network": ""}`, []string{"network"}, "must not be empty"},
		{`{"image": "web", "fixed_ip": true}`, []string{"fixed_ip"}, "user-defined network"},
		{`{"image": "web", "network": "host", "fixed_ip": true}`, []string{"fixed_ip"}, "user-defined network"},
		{`{"image": "web", "network": "pets", "fixed_ip": "yes"}`, []string{"fixed_ip"}, "must be true or false"},
		{`{"image": "web", "ports": "8080"}`, []string{"ports"}, "list of strings"},
		{`{"image": "web", "ports": ["8080", "http"]}`, []string{"ports", "1"}, "not a port number"},
		{`{"image": "web", "ports": ["70000"]}`, []string{"ports", "0"}, "not a port number"},
		{`{"image": "web", "ports": ["80/icmp"]}`, []string{"ports", "0"}, "protocol"},
		{`{"image": "web", "ports": ["host:80:80"]}`, []string{"ports", "0"}, "not an IP address"},
		{`{"image": "web", "ports": [true]}`, []string{"ports", "0"}, "must be a string"},
		{`{"image": "web", "network": "host", "ports": ["8080:80"]}`, []string{"ports", "0"}, "cannot publish"},
		{`{"image": "web", "cpus": "1"}`, []string{"cpus"}, "must be a number"},
		{`{"image": "web", "cpus": 0}`, []string{"cpus"}, "at least 0.01"},
		{`{"image": "web", "memory": "lots"}`, []string{"memory"}, "not a memory size"},
		{`{"image": "web", "memory": "1m"}`, []string{"memory"}, "minimum of 6m"},
		{`{"image": "web", "memory": true}`, []string{"memory"}, "must be a string"},
		{`{"image": "web", "restart": "sometimes"}`, []string{"restart"}, "not one of"},
		{`{"image": "web", "restart": "always:3"}`, []string{"restart"}, "only on-failure"},
		{`{"image": "web", "restart": "on-failure:-1"}`, []string{"restart"}, "whole number"},
		{`{"image": "web", "stop_timeout": "soon"}`, []string{"stop_timeout"}, "not a duration"},
		{`{"image": "web", "stop_timeout": "-1s"}`, []string{"stop_timeout"}, "negative"},
	} {
		_, err := Parse(json.RawMessage(tc.raw))
		var ds provider.Diagnostics
		if !errors.As(err, &ds) {
			t.Errorf("Parse(%s) = %v; want provider.Diagnostics", tc.raw, err)
			continue
		}
		found := false
		for _, d := range ds {
			if d.Severity == provider.Error && slices.Equal(d.Path, tc.path) && strings.Contains(d.Summary+": "+d.Detail, tc.text) {
				found = true
			}
		}
		if !found {
			t.Errorf("Parse(%s) = %v; want an error at %q mentioning %q", tc.raw, ds, tc.path, tc.text)
		}
	}
}

// Every problem is reported, not just the first.
func TestParseReportsAll(t *testing.T) {
	_, err := Parse(json.RawMessage(`{"command": [1], "cpus": -1, "memory": "x", "colour": 1}`))
	var ds provider.Diagnostics
	if !errors.As(err, &ds) {
		t.Fatal(err)
	}
	var paths []string
	for _, d := range ds {
		paths = append(paths, strings.Join(d.Path, "."))
	}
	slices.Sort(paths)
	want := []string{"colour", "command.0", "cpus", "image", "memory"}
	if !slices.Equal(paths, want) {
		t.Errorf("paths %q; want %q", paths, want)
	}
}

// The schema's attributes are exactly the properties Parse accepts, and
// every type is one HCL understands.
func TestSchemaMatchesParse(t *testing.T) {
	s := Schema()
	var names []string
	for n, a := range s.Attributes {
		names = append(names, n)
		if a.Description == "" {
			t.Errorf("attribute %q has no description", n)
		}
	}
	slices.Sort(names)
	want := slices.Sorted(slices.Values(topKeys))
	if !slices.Equal(names, want) {
		t.Errorf("schema attributes %q; Parse takes %q", names, want)
	}
	if !s.Attributes["image"].Required {
		t.Error("image is not required in the schema")
	}
}

func TestParseMemory(t *testing.T) {
	for in, want := range map[string]int64{
		"6m": 6 << 20, "64M": 64 << 20, "64mb": 64 << 20, "1g": 1 << 30, "1.5g": 3 << 29,
		"512k": 512 << 10, "512KB": 512 << 10, "100": 100, "100b": 100, " 2m ": 2 << 20,
	} {
		got, err := ParseMemory(in)
		if err != nil || got != want {
			t.Errorf("ParseMemory(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "m", "-1m", "1t", "one", "1e400", "NaN"} {
		if got, err := ParseMemory(in); err == nil {
			t.Errorf("ParseMemory(%q) = %d; want an error", in, got)
		}
	}
}

// formatPort writes p in the ports syntax.
func formatPort(p Port) string {
	s := strconv.Itoa(p.ContainerPort)
	if p.Published {
		host := strconv.Itoa(p.HostPort)
		if p.HostIP != "" {
			ip := p.HostIP
			if strings.Contains(ip, ":") {
				ip = "[" + ip + "]"
			}
			host = ip + ":" + host
		}
		s = host + ":" + s
	}
	return s + "/" + p.Proto
}

// Any port written in the ports syntax parses back to itself.
func TestParsePortRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := Port{
			ContainerPort: rapid.IntRange(1, 65535).Draw(t, "container"),
			Proto:         rapid.SampledFrom([]string{"tcp", "udp", "sctp"}).Draw(t, "proto"),
			Published:     rapid.Bool().Draw(t, "published"),
		}
		if p.Published {
			p.HostPort = rapid.IntRange(0, 65535).Draw(t, "host")
			p.HostIP = rapid.SampledFrom([]string{"", "127.0.0.1", "0.0.0.0", "::1", "fe80::1"}).Draw(t, "ip")
		}
		s := formatPort(p)
		got, err := ParsePort(s)
		if err != nil {
			t.Fatalf("ParsePort(%q): %v", s, err)
		}
		if got != p {
			t.Fatalf("ParsePort(%q) = %+v; want %+v", s, got, p)
		}
	})
}

// ParsePort never panics and either fails or returns a usable port.
func TestParsePortTotal(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.StringMatching(`[0-9a-z.:\[\]/]{0,20}`).Draw(t, "spec")
		p, err := ParsePort(s)
		if err != nil {
			return
		}
		if p.ContainerPort < 1 || p.ContainerPort > 65535 || p.HostPort < 0 || p.HostPort > 65535 || p.Proto == "" {
			t.Fatalf("ParsePort(%q) = %+v", s, p)
		}
		if !p.Published && (p.HostPort != 0 || p.HostIP != "") {
			t.Fatalf("ParsePort(%q) = %+v: a host side on an exposed-only port", s, p)
		}
	})
}

func ExampleParsePort() {
	for _, s := range []string{"8080", "9090:90/udp", "127.0.0.1:0:7000"} {
		p, _ := ParsePort(s)
		fmt.Printf("%s: container %s published=%v host %q:%d\n", s, p.Key(), p.Published, p.HostIP, p.HostPort)
	}
	// Output:
	// 8080: container 8080/tcp published=false host "":0
	// 9090:90/udp: container 90/udp published=true host "":9090
	// 127.0.0.1:0:7000: container 7000/tcp published=true host "127.0.0.1":0
}
