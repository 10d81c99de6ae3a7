package state

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/infrakit/infrakit/internal/config"
)

// TestDecodeRefusesInvalidStacks: a state whose stored stack (or a pending
// teardown) breaks the rules of the stack language is refused like a
// damaged file: ErrInvalid, the problem named, nothing handed out to act on.
func TestDecodeRefusesInvalidStacks(t *testing.T) {
	const group = `{"name": "web", %s, "instance": {"provider": "simulator", "type": "compute"}, "flavors": [{"provider": "vanilla"}]}`
	doc := func(stack string) string {
		return `{"version": 1, "serial": 3, "lineage": "L", "stack": ` + stack + `}`
	}
	stack := func(name, groupAttrs string) string {
		return `{"name": "` + name + `", "providers": [{"name": "simulator"}, {"name": "vanilla"}], "groups": [` +
			strings.Replace(group, "%s", groupAttrs, 1) + `]}`
	}
	for _, tc := range []struct{ name, data, want string }{
		{"negative size", doc(stack("s", `"size": -5`)), `the desired stack it holds is not valid.*group "web": the size must be at least 0; got -5`},
		{"size 1e9", doc(stack("s", `"size": 1000000000`)), `group "web": 1000000000 instances is more than the stack allows \(100000`},
		{"path as stack name", doc(stack("../../../tmp/x", `"size": 1`)), `"../../../tmp/x" is not a valid stack name`},
		{"reserved tag", doc(stack("s", `"size": 1, "tags": {"Infrakit.Group": "x"}`)), `tag "Infrakit.Group" is infrakit's own`},
		{"pending teardown", `{"version": 1, "serial": 3, "lineage": "L", "ingresses": {"web": {"pending": [{"name": "s", "ingresses": [{"name": "web", "rules": [{"loadbalancer": "lb", "groups": ["g"], "routes": [{"lb_port": -1, "port": 80}]}]}]}]}}}`,
			`a pending teardown of ingress "web" .*lb_port must be between 1 and 65535`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Decode("s.json", []byte(tc.data))
			var inv *InvalidError
			if got != nil || !errors.Is(err, ErrInvalid) || !errors.As(err, &inv) || !errors.Is(err, config.ErrInvalidStored) {
				t.Fatalf("Decode = %v, %v; want an InvalidError", got, err)
			}
			if !regexp.MustCompile("(?s)"+tc.want).MatchString(err.Error()) || !strings.HasSuffix(err.Error(), "refusing to use or overwrite it") {
				t.Errorf("error %q does not match %q", err, tc.want)
			}
		})
	}

	// The same stack within the rules decodes.
	if _, err := Decode("s.json", []byte(doc(stack("s", `"size": 100000`)))); err != nil {
		t.Fatal(err)
	}
}
