package command

import (
	"regexp"
	"strings"
	"testing"

	"github.com/mitchellh/cli"
)

func graphCmd(m Meta) cli.Command { return &GraphCommand{Meta: m} }

var dotEdge = regexp.MustCompile(`(?m)^\s*("[^"]+"|\w+) -> ("[^"]+"|\w+)$`)

// edges returns the graph's edges as "from -> to", labels unquoted.
func edges(dot string) []string {
	var out []string
	for _, m := range dotEdge.FindAllStringSubmatch(dot, -1) {
		out = append(out, strings.Trim(m[1], `"`)+" -> "+strings.Trim(m[2], `"`))
	}
	return out
}

// webIngress is an ingress of group web on lb1 (of simulatorStack).
const webIngress = `
ingress "web" {
  rule {
    loadbalancer = loadbalancer.lb1
    groups       = [group.web]
    route {
      lb_port     = 80
      lb_protocol = "http"
      port        = 80
      protocol    = "http"
    }
  }
}
`

func TestGraphOfTheStack(t *testing.T) {
	wd := t.TempDir()
	writeStack(t, wd, simulatorStack+webIngress)
	code, stdout, stderr := runCommand(t, graphCmd, wd)
	if code != 0 || !strings.HasPrefix(stdout, "digraph {") || !strings.HasSuffix(stdout, "}\n") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	got := strings.Join(edges(stdout), "\n")
	for _, want := range []string{"group.web -> provider.simulator", "loadbalancer.lb1 -> provider.simulator",
		"ingress.web -> loadbalancer.lb1", "ingress.web -> group.web"} {
		if !strings.Contains(got, want) {
			t.Errorf("no edge %q in:\n%s", want, stdout)
		}
	}

	writeStack(t, wd, strings.Replace(simulatorStack, "provider = simulator\n    type", "provider = nope\n    type", 1))
	if code, _, stderr := runCommand(t, graphCmd, wd); code != 1 || !strings.Contains(stderr, "main.hcl:") {
		t.Errorf("a bad reference: exit %d\n%s", code, stderr)
	}
}

// TestGraphOfThePlan draws the plan of a group of two behind an ingress
// with the real simulator: each registration waits for its member's await,
// which waits for its provision.
func TestGraphOfThePlan(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a provider")
	}
	wd := initSimulator(t, strings.Replace(simulatorStack, "size = 1", "size = 2", 1)+webIngress)
	code, stdout, stderr := runCommand(t, graphCmd, wd, "-plan")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	labels := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^\s*(step\d+) \[label = "([^"]+)"`).FindAllStringSubmatch(stdout, -1) {
		labels[m[1]] = m[2]
	}
	waits := map[string]bool{}
	for _, e := range edges(stdout) {
		from, to, _ := strings.Cut(e, " -> ")
		waits[kindOf(labels[from])+" -> "+kindOf(labels[to])] = true
	}
	for _, want := range []string{"await -> provision", "register -> await"} {
		if !waits[want] {
			t.Errorf("no %q edge in:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stdout, `label = "group.web"`) || !strings.Contains(stdout, `label = "ingress.web"`) {
		t.Errorf("steps not clustered by object:\n%s", stdout)
	}
}

// kindOf is the step kind of a label "3 register (made by 2) on lb1".
func kindOf(label string) string {
	if f := strings.Fields(label); len(f) > 1 {
		return f[1]
	}
	return ""
}
