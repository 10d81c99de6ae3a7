package container

import (
	"testing"
	"time"

	"github.com/infrakit/infrakit/sdk/instance"
)

func TestRestartable(t *testing.T) {
	for _, c := range []struct {
		props string // the properties label; "-" for none
		want  bool
	}{
		{`{"image":"web"}`, false}, // the default is "no"
		{`{"image":"web","restart":"no"}`, false},
		{`{"image":"web","restart":null}`, false},
		{`{"image":"web","restart":"always"}`, true},
		{`{"image":"web","restart":"on-failure:3"}`, true},
		{`not json`, true}, // unknown: never declared dead early
		{"-", true},
	} {
		labels := map[string]string{LabelTags: `["infrakit.group"]`}
		if c.props != "-" {
			labels[LabelProperties] = c.props
		}
		if got := restartable(labels); got != c.want {
			t.Errorf("restartable with properties %s = %v, want %v", c.props, got, c.want)
		}
	}
}

// A die event is believed for a container Docker will not restart: its
// descriptions say terminating while the listing still says running, until
// it is gone. One Docker may restart is described as the listing says.
func TestDescribeAfterDie(t *testing.T) {
	p, err := New(Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	labels := func(props string) map[string]string {
		return map[string]string{"infrakit.group": "web", LabelTags: `["infrakit.group"]`, LabelProperties: props}
	}
	final := listed(fullID, "running", "bridge", "172.17.0.5", labels(`{"image":"web"}`))
	again := listed("fedcba9876543210", "running", "bridge", "172.17.0.6", labels(`{"image":"web","restart":"always"}`))

	now := time.Now()
	p.markDied(shortID(final.ID), final.Labels, now)
	p.markDied(shortID(again.ID), again.Labels, now)
	if d, _ := p.describe(final, nil, false); d.State != instance.StateTerminating {
		t.Errorf("a container with restart \"no\" that died is %s, want terminating", d.State)
	}
	if d, _ := p.describe(again, nil, false); d.State != instance.StateRunning {
		t.Errorf("a container Docker restarts is %s after its die event, want what the listing says (running)", d.State)
	}
	p.forgetDied(shortID(final.ID))
	if d, _ := p.describe(final, nil, false); d.State != instance.StateRunning {
		t.Errorf("after its destroy event: %s, want what the listing says", d.State)
	}

	// Deaths older than diedTTL are forgotten at the next one.
	p.markDied(shortID(final.ID), final.Labels, now)
	p.markDied("aaaaaaaaaaaa", final.Labels, now.Add(diedTTL+time.Second))
	if p.hasDied(shortID(final.ID)) {
		t.Error("a death older than diedTTL is still remembered")
	}
}
