package container

import (
	"encoding/json"
	"time"

	"github.com/infrakit/infrakit/plugins/docker/engine"
	"github.com/infrakit/infrakit/sdk/instance"
)

// Docker emits a container's die event before it records the exit where
// list calls read it: the daemon first waits for the container's output
// streams to drain, and until then a listing still says "running" (0.1 to
// 0.3 s on a busy host, measured with Docker 20.10). A container Docker
// will not restart (restart policy "no", every instance made with the
// default) can never run again once it died, so for those the provider
// believes the event: from its die event until it is gone, the container
// is described as terminating, in the watch's events and in
// DescribeInstances alike. The group then replaces it that much sooner,
// and the load balancer drops it that much sooner, than if they waited
// for the listing (or for the removal that AutoRemove then makes).

// diedTTL bounds how long a death is remembered: by then Docker has long
// removed the container, or its listing says it exited.
const diedTTL = 5 * time.Minute

// markDied remembers that the container id died (at), if Docker will not
// restart it; labels are the event's attributes, which carry the
// container's labels.
func (p *Provider) markDied(id instance.ID, labels map[string]string, at time.Time) {
	if restartable(labels) {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.died == nil {
		p.died = map[instance.ID]time.Time{}
	}
	for k, t := range p.died {
		if at.Sub(t) > diedTTL {
			delete(p.died, k)
		}
	}
	p.died[id] = at
}

// forgetDied drops id's death (the container is gone).
func (p *Provider) forgetDied(id instance.ID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.died, id)
}

func (p *Provider) hasDied(id instance.ID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.died[id]
	return ok
}

// describe is the package's describe, with the deaths the event stream
// reported and the listing does not show yet.
func (p *Provider) describe(c engine.Container, extra map[string]string, withProperties bool) (instance.Description, bool) {
	d, ok := describe(c, extra, withProperties)
	if ok && d.State != instance.StateTerminating && p.hasDied(d.ID) {
		d.State = instance.StateTerminating
	}
	return d, ok
}

// restartable reports whether Docker may restart the container whose
// labels these are: its restart policy (from the properties it was made
// from) is not "no". Unknown properties count as restartable, so that
// nothing but a container known to be final is declared dead early.
func restartable(labels map[string]string) bool {
	raw, ok := labels[LabelProperties]
	if !ok {
		return true
	}
	var props struct {
		Restart *string `json:"restart"`
	}
	if err := json.Unmarshal([]byte(raw), &props); err != nil {
		return true
	}
	return props.Restart != nil && *props.Restart != "no"
}
