package lb

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestConfigFromEnv(t *testing.T) {
	env := map[string]string{
		EnvDir: "/var/lib/infrakit/haproxy", EnvBind: "0.0.0.0", EnvSlots: "32",
		EnvFastInterval: "250ms", EnvCheckPath: "/healthz", EnvConnectTimeout: "3s",
	}
	s, err := ConfigFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	s, err = s.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if s.Dir != "/var/lib/infrakit/haproxy" || s.Bind != "0.0.0.0" || s.Slots != 32 || s.FastInterval != 250*time.Millisecond ||
		s.CheckPath != "/healthz" || s.ConnectTimeout != 3*time.Second || s.CertDir != "/var/lib/infrakit/haproxy/certs" || s.External() ||
		s.Config != "/var/lib/infrakit/haproxy/haproxy.cfg" || s.MasterSocket != "/var/lib/infrakit/haproxy/master.sock" {
		t.Fatalf("settings %+v", s)
	}

	for _, bad := range []map[string]string{
		{EnvSlots: "0"}, {EnvSlots: "many"}, {EnvFastInterval: "-1s"}, {EnvFastInterval: "soon"},
		{EnvConnectTimeout: "0s"}, {EnvConnectTimeout: "1us"}, {EnvConnectTimeout: "fast"},
	} {
		if _, err := ConfigFromEnv(func(k string) string { return bad[k] }); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

func TestWithDefaults(t *testing.T) {
	s, err := Settings{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := filepath.Abs(DefaultDir); s.Dir != want || s.Slots != DefaultSlots || s.Bind != DefaultBind ||
		s.ConnectTimeout != DefaultConnectTimeout {
		t.Fatalf("defaults %+v", s)
	}
	ext, err := Settings{Dir: "/tmp/x", Config: "/etc/haproxy/conf.d/infrakit.cfg", MasterSocket: "/run/haproxy-master.sock"}.withDefaults()
	if err != nil || !ext.External() || ext.Config != "/etc/haproxy/conf.d/infrakit.cfg" {
		t.Fatalf("external %+v %v", ext, err)
	}
	for name, bad := range map[string]Settings{
		"socket without config": {MasterSocket: "/run/haproxy-master.sock"},
		"config without socket": {Config: "/etc/haproxy/conf.d/infrakit.cfg"},
		"socket path too long":  {Dir: "/tmp/" + strings.Repeat("d", 100)},
	} {
		if _, err := bad.withDefaults(); err == nil {
			t.Errorf("%s: accepted", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}
