package container

import (
	"bytes"
	"encoding/json"
	"reflect"
	"regexp"
	"testing"

	"pgregory.net/rapid"

	"github.com/infrakit/infrakit/plugins/docker/engine"
	"github.com/infrakit/infrakit/sdk/instance"
)

func TestContainerConfig(t *testing.T) {
	raw := json.RawMessage(`{
		"image": "web:1",
		"command": ["/web"],
		"env": {"PORT": "8080", "A": "1"},
		"labels": {"team": "edge", "tier": "from-labels"},
		"ports": ["8080", "0:9090", "127.0.0.1:7000:7000/udp"],
		"cpus": 1.5,
		"memory": "64m",
		"stop_timeout": "1500ms"
	}`)
	p, err := Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	lid := instance.LogicalID("db-1")
	spec := instance.Spec{
		Properties: raw,
		Tags:       map[string]string{"infrakit.group": "web", "tier": "from-tags"},
		Init:       "echo hi",
		LogicalID:  &lid,
	}
	got := containerConfig(p, raw, spec)
	stop := 2
	want := engine.ContainerConfig{
		Image: "web:1",
		Cmd:   []string{"/web"},
		Env:   []string{"A=1", "PORT=8080", "INFRAKIT_LOGICAL_ID=db-1", "INFRAKIT_INIT=echo hi"},
		Labels: map[string]string{
			"team": "edge", "tier": "from-tags", "infrakit.group": "web",
			LabelTags:       `["infrakit.group","tier"]`,
			LabelLogicalID:  "db-1",
			LabelPort:       "8080",
			LabelProperties: compactJSON(t, raw),
		},
		ExposedPorts: map[string]struct{}{"8080/tcp": {}, "9090/tcp": {}, "7000/udp": {}},
		StopTimeout:  &stop,
		HostConfig: engine.HostConfig{
			NetworkMode: "bridge",
			PortBindings: map[string][]engine.PortBinding{
				"9090/tcp": {{HostPort: ""}},
				"7000/udp": {{HostIP: "127.0.0.1", HostPort: "7000"}},
			},
			NanoCPUs:      1_500_000_000,
			Memory:        64 << 20,
			RestartPolicy: engine.RestartPolicy{Name: "no"},
			AutoRemove:    true,
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("containerConfig:\n got %+v\nwant %+v", got, want)
	}

	// A restart policy other than "no" keeps exited containers: Docker
	// rejects AutoRemove with one.
	p.Restart = Restart{Name: "on-failure", MaxRetries: 2}
	got = containerConfig(p, raw, instance.Spec{Properties: raw})
	if got.HostConfig.AutoRemove || got.HostConfig.RestartPolicy != (engine.RestartPolicy{Name: "on-failure", MaximumRetryCount: 2}) {
		t.Errorf("restart on-failure:2: %+v", got.HostConfig)
	}
	if got.Labels[LabelTags] != "[]" {
		t.Errorf("no tags: %s = %q; want []", LabelTags, got.Labels[LabelTags])
	}
}

func compactJSON(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// listed is a container as the Engine lists one the provider made.
func listed(id, state, network, ip string, labels map[string]string) engine.Container {
	c := engine.Container{ID: id, State: state, Labels: labels}
	c.HostConfig.NetworkMode = network
	if ip != "" {
		c.NetworkSettings.Networks = map[string]engine.Endpoint{network: {IPAddress: ip}}
	}
	return c
}

const fullID = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestDescribe(t *testing.T) {
	labels := map[string]string{
		"infrakit.group": "web", "tier": "front", "team": "edge",
		LabelTags: `["infrakit.group","tier","vanished"]`, LabelPort: "8080", LabelLogicalID: "db-1",
		LabelProperties: `{"image":"web"}`,
	}
	c := listed(fullID, "running", "bridge", "172.17.0.5", labels)
	d, ok := describe(c, map[string]string{"tier": "back", "added": "yes"}, true)
	if !ok {
		t.Fatal("a container with the provider's labels is not described")
	}
	lid := instance.LogicalID("db-1")
	want := instance.Description{
		ID: "0123456789ab", LogicalID: &lid,
		Tags:       map[string]string{"infrakit.group": "web", "tier": "back", "added": "yes"},
		Properties: json.RawMessage(`{"image":"web"}`),
		Address:    "172.17.0.5:8080",
		State:      instance.StateRunning,
	}
	if !reflect.DeepEqual(d, want) {
		t.Errorf("describe:\n got %+v\nwant %+v", d, want)
	}
	if d, _ := describe(c, nil, false); d.Properties != nil {
		t.Errorf("properties without withProperties: %s", d.Properties)
	}
	delete(labels, LabelTags)
	if _, ok := describe(c, nil, false); ok {
		t.Error("a container without the provider's labels is described")
	}
	labels[LabelTags] = "not json"
	if _, ok := describe(c, nil, false); ok {
		t.Error("a container with a broken tags label is described")
	}
}

func TestStateOf(t *testing.T) {
	for docker, want := range map[string]instance.State{
		"created": instance.StatePending, "restarting": instance.StatePending,
		"running": instance.StateRunning, "paused": instance.StateRunning,
		"removing": instance.StateTerminating, "exited": instance.StateTerminating, "dead": instance.StateTerminating,
		"something-new": instance.StatePending,
	} {
		if got := stateOf(docker); got != want {
			t.Errorf("stateOf(%q) = %q; want %q", docker, got, want)
		}
	}
}

func TestAddressOf(t *testing.T) {
	port := map[string]string{LabelPort: "80"}
	for _, tc := range []struct {
		name string
		c    engine.Container
		want string
	}{
		{"bridge with port", listed(fullID, "running", "bridge", "172.17.0.2", port), "172.17.0.2:80"},
		{"bridge without port", listed(fullID, "running", "bridge", "172.17.0.2", nil), "172.17.0.2"},
		{"default is bridge", func() engine.Container {
			c := listed(fullID, "running", "default", "", port)
			c.NetworkSettings.Networks = map[string]engine.Endpoint{"bridge": {IPAddress: "172.17.0.3"}}
			return c
		}(), "172.17.0.3:80"},
		{"user network", listed(fullID, "running", "backend", "10.1.0.2", port), "10.1.0.2:80"},
		{"network by ID", func() engine.Container {
			c := listed(fullID, "running", "4f2a", "", port)
			c.NetworkSettings.Networks = map[string]engine.Endpoint{"backend": {IPAddress: "10.1.0.3"}}
			return c
		}(), "10.1.0.3:80"},
		{"no IP yet", listed(fullID, "created", "bridge", "", port), ""},
		{"host network", listed(fullID, "running", "host", "", port), "127.0.0.1:80"},
		{"none network", listed(fullID, "running", "none", "", port), ""},
		{"another container's network", listed(fullID, "running", "container:abc", "", port), ""},
		{"IPv6", listed(fullID, "running", "v6", "fd00::2", port), "[fd00::2]:80"},
	} {
		if got := addressOf(tc.c); got != tc.want {
			t.Errorf("%s: addressOf = %q; want %q", tc.name, got, tc.want)
		}
	}
}

func TestLabelFilter(t *testing.T) {
	want := map[string]string{"infrakit.group": "web", "tier": "front", "b": "x=y"}
	got := labelFilter(want, func(k string) bool { return k == "tier" })
	wantF := engine.Filters{"label": {LabelTags, "b=x=y", "infrakit.group=web"}}
	if !reflect.DeepEqual(got, wantF) {
		t.Errorf("labelFilter = %v; want %v", got, wantF)
	}
	if got := labelFilter(nil, func(string) bool { return false }); !reflect.DeepEqual(got, engine.Filters{"label": {LabelTags}}) {
		t.Errorf("labelFilter(nil) = %v: it must still select only the provider's containers", got)
	}
}

var dockerName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]+$`)

func TestContainerName(t *testing.T) {
	lid := instance.LogicalID("10.0.0.1")
	odd := instance.LogicalID("/a b/")
	for _, tc := range []struct {
		tags map[string]string
		lid  *instance.LogicalID
		want string
	}{
		{map[string]string{"infrakit.stack": "docker", "infrakit.group": "web"}, nil, "docker-web-0a1b2c3d"},
		{map[string]string{"infrakit.group": "db"}, &lid, "db-10.0.0.1-0a1b2c3d"},
		{nil, nil, "infrakit-0a1b2c3d"},
		{map[string]string{"infrakit.group": "_x"}, &odd, "x--a-b-0a1b2c3d"},
		{map[string]string{"infrakit.group": "//"}, nil, "infrakit-0a1b2c3d"},
	} {
		got := containerName(tc.tags, tc.lid, "0a1b2c3d")
		if got != tc.want || !dockerName.MatchString(got) {
			t.Errorf("containerName(%v, %v) = %q; want %q (a valid Docker name)", tc.tags, tc.lid, got, tc.want)
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		tags := map[string]string{
			"infrakit.stack": rapid.String().Draw(t, "stack"),
			"infrakit.group": rapid.String().Draw(t, "group"),
		}
		l := instance.LogicalID(rapid.String().Draw(t, "lid"))
		if got := containerName(tags, &l, "0a1b2c3d"); !dockerName.MatchString(got) || len(got) > 128 {
			t.Fatalf("containerName(%q, %q) = %q: not a valid Docker name", tags, l, got)
		}
	})
}
