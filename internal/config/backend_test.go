package config_test

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/infrakit/infrakit/internal/config"
)

func TestBackendEtcd(t *testing.T) {
	t.Setenv(config.EtcdPasswordEnv, "from-env")
	st, diags, dir := loadSource(t, map[string]string{"stack.hcl": `
stack "mystack" {
  backend "etcd" {
    endpoints = ["https://10.0.0.1:2379", "10.0.0.2:2379"]
    prefix    = "/prod/mystack/"
    lease_ttl = "5s"
    cert_file = "tls/client.pem"
    key_file  = "/etc/infrakit/client-key.pem"
    ca_file   = "tls/ca.pem"
    username  = "infrakit"
    scale_out = true
  }
}
`})
	if len(diags) > 0 {
		t.Fatalf("unexpected diagnostics:\n%s", render(st, diags))
	}
	got := *st.Backend
	got.DeclRange = hcl.Range{}
	want := config.Backend{
		Type:      config.BackendEtcd,
		Endpoints: []string{"https://10.0.0.1:2379", "10.0.0.2:2379"},
		Prefix:    "/prod/mystack",
		LeaseTTL:  config.Duration(5 * time.Second),
		CertFile:  filepath.Join(dir, "tls/client.pem"),
		KeyFile:   "/etc/infrakit/client-key.pem",
		CAFile:    filepath.Join(dir, "tls/ca.pem"),
		Username:  "infrakit",
		Password:  "from-env",
		ScaleOut:  true,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("backend:\ngot  %+v\nwant %+v", got, want)
	}
	if st.Backend.IsLocal() {
		t.Error("an etcd backend reports IsLocal")
	}

	// The backend says where state lives: it is not part of the stack
	// stored in state, and the password is never serialised.
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "backend") || strings.Contains(string(b), "10.0.0.1") {
		t.Errorf("stack JSON carries the backend: %s", b)
	}
	b, err = json.Marshal(st.Backend)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "from-env") {
		t.Errorf("backend JSON carries the password: %s", b)
	}
	var back config.Backend
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	want.Password = ""
	if !reflect.DeepEqual(back, want) {
		t.Errorf("backend JSON round trip:\ngot  %+v\nwant %+v", back, want)
	}
}

func TestBackendDefaults(t *testing.T) {
	st := mustLoad(t, `
stack "web" {
  backend "etcd" {
    endpoints = ["http://127.0.0.1:2379"]
    username  = "u"
    password  = "p"
  }
}
`)
	b := st.Backend
	if b.Prefix != "/infrakit/web" || b.LeaseTTL != config.DefaultLeaseTTL || b.Password != "p" || b.ScaleOut {
		t.Errorf("defaults: prefix %q, lease_ttl %s, password %q", b.Prefix, b.LeaseTTL, b.Password)
	}
	if got := b.String(); got != "etcd /infrakit/web at http://127.0.0.1:2379" {
		t.Errorf("String() = %q", got)
	}

	if st := mustLoad(t, `stack "web" {}`); st.Backend != nil || !st.Backend.IsLocal() {
		t.Errorf("no backend block: %+v", st.Backend)
	}
	st = mustLoad(t, `
stack "web" {
  backend "local" {}
}
`)
	if st.Backend == nil || st.Backend.Type != config.BackendLocal || !st.Backend.IsLocal() || st.Backend.String() != "local" {
		t.Errorf("backend \"local\": %+v", st.Backend)
	}
}

// TestBackendInvalid checks each mistake gets one error that points at it.
func TestBackendInvalid(t *testing.T) {
	t.Setenv(config.EtcdPasswordEnv, "")
	tests := []struct {
		name    string
		body    string // inside the stack block
		pos     string // line:col in stack.hcl
		summary string
		detail  string
	}{
		{"unknown type", `backend "consul" {}`, "2:9", "Unsupported backend type", `"local"`},
		{"no endpoints", `backend "etcd" {}`, "2:16", "Missing required argument", `"endpoints" is required`},
		{"empty endpoints", `backend "etcd" { endpoints = [] }`, "2:30", "No endpoints", "at least one endpoint"},
		{"bad scheme", `backend "etcd" { endpoints = ["unix://x"] }`, "2:30", "Invalid endpoint", `"unix://x"`},
		{"empty endpoint", `backend "etcd" { endpoints = [""] }`, "2:30", "Invalid endpoint", "must not be empty"},
		{"endpoints not a list", `backend "etcd" { endpoints = "x:1" }`, "2:30", "Incorrect attribute value type", "list of string required"},
		{"short lease", `backend "etcd" {
  endpoints = ["a:1"]
  lease_ttl = "500ms"
}`, "4:15", "Invalid duration", "at least 1s"},
		{"root prefix", `backend "etcd" {
  endpoints = ["a:1"]
  prefix = "/"
}`, "4:12", "Invalid prefix", `other than "/"`},
		{"cert without key", `backend "etcd" {
  endpoints = ["a:1"]
  cert_file = "c.pem"
}`, "2:1", "Incomplete client certificate", "both cert_file and key_file"},
		{"password without username", `backend "etcd" {
  endpoints = ["a:1"]
  password = "p"
}`, "4:3", "Password without username", "only used with a username"},
		{"username without password", `backend "etcd" {
  endpoints = ["a:1"]
  username = "u"
}`, "4:3", "Missing password", config.EtcdPasswordEnv},
		{"unknown attribute", `backend "etcd" {
  endpoints = ["a:1"]
  lease = "5s"
}`, "4:3", "Unsupported argument", "lease"},
		{"local takes nothing", `backend "local" { path = "x" }`, "2:19", "Unsupported argument", `"path"`},
		{"scale_out on local", `backend "local" { scale_out = true }`, "2:19", "Scale-out needs the etcd backend", `backend "etcd"`},
		{"scale_out not a bool", `backend "etcd" {
  endpoints = ["a:1"]
  scale_out = "maybe"
}`, "4:15", "Incorrect attribute value type", "a bool is required"},
		{"two backends", `backend "local" {}
backend "etcd" { endpoints = ["a:1"] }`, "3:1", "Duplicate backend block", "stack.hcl:2:1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "stack \"s\" {\n" + tt.body + "\n}\n"
			st, diags, dir := loadSource(t, map[string]string{"stack.hcl": src})
			if len(diags) != 1 {
				t.Fatalf("want exactly 1 diagnostic, got %d:\n%s", len(diags), render(st, diags))
			}
			d := diags[0]
			if d.Severity != hcl.DiagError || d.Summary != tt.summary || !strings.Contains(d.Detail, tt.detail) {
				t.Errorf("got %q: %q; want %q containing %q", d.Summary, d.Detail, tt.summary, tt.detail)
			}
			if got := strings.TrimPrefix(pos(dir, d.Subject), "stack.hcl:"); got != tt.pos {
				t.Errorf("points at %s, want %s\n%s", got, tt.pos, render(st, diags))
			}
			if tt.summary != "Duplicate backend block" && st.Backend != nil && st.Backend.Type == config.BackendEtcd {
				t.Errorf("an invalid etcd backend was kept: %+v", st.Backend)
			}
		})
	}
}
