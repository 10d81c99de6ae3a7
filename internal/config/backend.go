package config

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// Backend types.
const (
	BackendLocal = "local"
	BackendEtcd  = "etcd"
)

// Backend defaults and the password's environment variable.
const (
	// DefaultBackendPrefix is the key prefix of a stack's state in etcd:
	// DefaultBackendPrefix + "/" + the stack name.
	DefaultBackendPrefix = "/infrakit"
	// DefaultLeaseTTL is the etcd backend's lease TTL: a crashed lock
	// holder or leader is replaced after about this long.
	DefaultLeaseTTL = Duration(15 * time.Second)
	// EtcdPasswordEnv holds the etcd password when the backend block names
	// a username but no password (keep secrets out of stack files).
	EtcdPasswordEnv = "INFRAKIT_ETCD_PASSWORD"
)

// blockBackend is the backend block inside the stack block.
const blockBackend = "backend"

// Backend is the stack block's backend block: where the state lives and
// how it is locked. A stack without one (Stack.Backend nil) keeps its state
// in the local file, as backend "local" {} says explicitly.
//
// Its JSON form (without the password) is what `infrakit init` records in
// .infrakit/backend.json; it is not part of the stack stored in state.
type Backend struct {
	// Type is BackendLocal or BackendEtcd.
	Type string `json:"type"`
	// Endpoints are etcd client URLs ("https://10.0.0.1:2379") or host:port.
	Endpoints []string `json:"endpoints,omitempty"`
	// Prefix is the key prefix of this stack's state, lock and election
	// (default DefaultBackendPrefix/<stack name>), without a trailing slash.
	Prefix string `json:"prefix,omitempty"`
	// LeaseTTL is the lease TTL of the lock and of leader election.
	LeaseTTL Duration `json:"lease_ttl,omitempty"`
	// TLS client certificate and key, and the CA that signs the server's
	// certificate: absolute paths (relative ones in the file are resolved
	// against the directory of the file holding the block).
	CertFile string `json:"cert_file,omitempty"`
	KeyFile  string `json:"key_file,omitempty"`
	CAFile   string `json:"ca_file,omitempty"`
	// Username and Password authenticate to etcd. Password comes from the
	// block or, when the block has none, from $INFRAKIT_ETCD_PASSWORD; it
	// is never written anywhere.
	Username string `json:"username,omitempty"`
	Password string `json:"-"`
	// ScaleOut makes the watch processes of the stack share the work
	// instead of electing one leader: each group, ingress and enrollment
	// is leased to one of them at a time (website/operations/scale-out.md).
	// Only the etcd backend has it.
	ScaleOut bool `json:"scale_out,omitempty"`

	DeclRange hcl.Range `json:"-"`
}

// IsLocal reports whether b means the local file (b may be nil).
func (b *Backend) IsLocal() bool { return b == nil || b.Type == BackendLocal }

// String names the backend for messages: `local`, `etcd /infrakit/x at
// [http://127.0.0.1:2379]`.
func (b *Backend) String() string {
	if b.IsLocal() {
		return BackendLocal
	}
	return fmt.Sprintf("%s %s at %s", b.Type, b.Prefix, strings.Join(b.Endpoints, ","))
}

var (
	// The local schema names scale_out only to refuse it with a clear
	// error rather than HCL's "Unsupported argument".
	localBackendSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "scale_out"}}}
	etcdBackendSchema  = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{
			{Name: "endpoints", Required: true}, {Name: "prefix"}, {Name: "lease_ttl"},
			{Name: "cert_file"}, {Name: "key_file"}, {Name: "ca_file"},
			{Name: "username"}, {Name: "password"}, {Name: "scale_out"},
		},
	}
)

// decodeBackend decodes the stack block's backend blocks (at most one).
func (l *loader) decodeBackend(stack *hcl.Block, blocks []*hcl.Block) {
	b := l.single(stack, blockBackend, blocks, "")
	if b == nil {
		return
	}
	be := &Backend{Type: b.Labels[0], DeclRange: b.DefRange}
	switch be.Type {
	case BackendLocal:
		content, d := b.Body.Content(localBackendSchema)
		l.diags = append(l.diags, d...)
		if a := content.Attributes["scale_out"]; a != nil {
			l.errorf(a.NameRange, "Scale-out needs the etcd backend",
				"scale_out shares the work among several watch processes through etcd; with the local state file one watch runs per state. "+
					"Remove scale_out, or use backend %q.", BackendEtcd)
		}
	case BackendEtcd:
		if !l.decodeEtcdBackend(be, b) {
			return
		}
	default:
		l.errorf(b.LabelRanges[0], "Unsupported backend type",
			"Backend %q is not one infrakit has; use %q (the default: the state file in the working directory) or %q.",
			be.Type, BackendLocal, BackendEtcd)
		return
	}
	l.st.Backend = be
}

func (l *loader) decodeEtcdBackend(be *Backend, b *hcl.Block) bool {
	content, d := b.Body.Content(etcdBackendSchema)
	l.diags = append(l.diags, d...)
	if d.HasErrors() {
		return false
	}
	ok := true
	if a := content.Attributes["endpoints"]; a != nil {
		be.Endpoints, ok = l.endpoints(a)
	}
	be.Prefix = DefaultBackendPrefix + "/" + l.st.Name
	if a := content.Attributes["prefix"]; a != nil {
		if s, good := l.stringAttr(a, true); good {
			be.Prefix = strings.TrimRight(s, "/")
			if be.Prefix == "" {
				l.errorf(a.Expr.Range(), "Invalid prefix", "The prefix must name a key prefix other than \"/\", like \"/infrakit/%s\".", l.st.Name)
				ok = false
			}
		} else {
			ok = false
		}
	}
	be.LeaseTTL = DefaultLeaseTTL
	if a := content.Attributes["lease_ttl"]; a != nil {
		v, good := l.durationAttr(a, time.Second)
		ok = ok && good
		be.LeaseTTL = v
	}
	path := func(name string) string {
		a := content.Attributes[name]
		if a == nil {
			return ""
		}
		s, good := l.stringAttr(a, true)
		if !good {
			ok = false
			return ""
		}
		if !filepath.IsAbs(s) && b.DefRange.Filename != "" {
			s = filepath.Join(filepath.Dir(b.DefRange.Filename), s)
		}
		return s
	}
	be.CertFile, be.KeyFile, be.CAFile = path("cert_file"), path("key_file"), path("ca_file")
	if (be.CertFile == "") != (be.KeyFile == "") {
		l.errorf(b.DefRange, "Incomplete client certificate",
			"A TLS client certificate needs both cert_file and key_file.")
		ok = false
	}
	if a := content.Attributes["scale_out"]; a != nil {
		before := len(l.diags)
		be.ScaleOut, _ = l.boolAttr(a) // null is unset, not an error
		ok = ok && !l.diags[before:].HasErrors()
	}
	if a := content.Attributes["username"]; a != nil {
		be.Username, _ = l.stringAttr(a, true)
	}
	if a := content.Attributes["password"]; a != nil {
		if be.Username == "" {
			l.errorf(a.NameRange, "Password without username", "A password is only used with a username.")
			ok = false
		}
		be.Password, _ = l.stringAttr(a, false)
	} else if be.Username != "" {
		be.Password = os.Getenv(EtcdPasswordEnv)
		if be.Password == "" {
			l.errorf(content.Attributes["username"].NameRange, "Missing password",
				"A username needs a password: set $%s (or password = ..., which keeps the secret in the stack file).", EtcdPasswordEnv)
			ok = false
		}
	}
	return ok
}

// endpoints decodes a non-empty list of etcd client URLs.
func (l *loader) endpoints(a *hcl.Attribute) ([]string, bool) {
	v, good := l.value(a, cty.List(cty.String), nil, true)
	if !good {
		return nil, false
	}
	if v.LengthInt() == 0 {
		l.errorf(a.Expr.Range(), "No endpoints", `The etcd backend needs at least one endpoint, like ["http://127.0.0.1:2379"].`)
		return nil, false
	}
	var out []string
	ok := true
	for _, e := range v.AsValueSlice() {
		if e.IsNull() || e.AsString() == "" {
			l.errorf(a.Expr.Range(), "Invalid endpoint", "An endpoint must not be empty.")
			ok = false
			continue
		}
		s := e.AsString()
		if strings.Contains(s, "://") {
			u, err := url.Parse(s)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				l.errorf(a.Expr.Range(), "Invalid endpoint",
					"%q is not an etcd client URL: write http://host:port, https://host:port or host:port.", s)
				ok = false
				continue
			}
		}
		out = append(out, s)
	}
	return out, ok
}
