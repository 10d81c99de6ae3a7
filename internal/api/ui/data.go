package ui

import (
	"encoding/json"
	"time"

	"github.com/infrakit/infrakit/internal/watch/status"
)

// The documents the pages read, declared as the API's (the CLI's -json)
// shapes: website/cli.md and website/watch.md. GET /v1/status and GET
// /v1/events are status.Status and status.Event.

// stateDoc is GET /v1/state (show -json).
type stateDoc struct {
	Stack       string          `json:"stack"`
	Serial      uint64          `json:"serial"`
	Groups      []stateGroup    `json:"groups"`
	Ingresses   []stateIngress  `json:"ingresses"`
	Enrollments []stateEnrolled `json:"enrollments"`
}

type stateGroup struct {
	Group         string   `json:"group"`
	Size          *int     `json:"size"`
	LogicalIDs    []string `json:"logical_ids"`
	Instances     int      `json:"instances"`
	Freed         bool     `json:"freed"`
	UpdateStopped bool     `json:"update_stopped"`
}

type stateIngress struct {
	Ingress       string `json:"ingress"`
	Freed         bool   `json:"freed"`
	LoadBalancers []struct {
		LoadBalancer string   `json:"loadbalancer"`
		Groups       []string `json:"groups"`
	} `json:"loadbalancers"`
}

type stateEnrolled struct {
	Enrollment string `json:"enrollment"`
	Source     string `json:"source"`
	Freed      bool   `json:"freed"`
}

// groupDoc is GET /v1/groups/NAME (group describe -json), and each
// element of GET /v1/groups.
type groupDoc struct {
	Group     string        `json:"group"`
	Size      *int          `json:"size"`
	Freed     bool          `json:"freed"`
	Instances []instanceDoc `json:"instances"`
	Rolling   struct {
		Outdated int  `json:"outdated"`
		Stopped  bool `json:"stopped"`
	} `json:"rolling"`
	Brake *status.Brake `json:"brake"`
}

type instanceDoc struct {
	ID        string            `json:"id"`
	LogicalID *string           `json:"logical_id"`
	Tags      map[string]string `json:"tags"`
	State     string            `json:"state"`
	Health    string            `json:"health"`
	Address   string            `json:"address"`
}

// routesDoc is GET /v1/loadbalancers/NAME/routes (lb routes ls -json).
type routesDoc struct {
	LoadBalancer string `json:"loadbalancer"`
	Routes       []struct {
		LBPort      int    `json:"lb_port"`
		LBProtocol  string `json:"lb_protocol"`
		Port        int    `json:"port"`
		Protocol    string `json:"protocol"`
		Certificate string `json:"certificate"`
	} `json:"routes"`
}

// backendsDoc is GET /v1/loadbalancers/NAME/backends (lb backends ls -json).
type backendsDoc struct {
	LoadBalancer string   `json:"loadbalancer"`
	Backends     []string `json:"backends"`
}

// enrollmentDoc is GET /v1/enrollments/NAME (enrollment describe -json).
type enrollmentDoc struct {
	Enrollment     string `json:"enrollment"`
	Authorizations []struct {
		ID         string          `json:"id"`
		SourceID   string          `json:"source_id"`
		Properties json.RawMessage `json:"properties"`
	} `json:"authorizations"`
}

// member is an instance found in some group, for the pages that name
// instances by ID (backends, authorizations).
type member struct {
	Group string
	instanceDoc
}

// membersByID indexes the instances of groups.
func membersByID(groups []groupDoc) map[string]member {
	out := map[string]member{}
	for _, g := range groups {
		for _, in := range g.Instances {
			out[in.ID] = member{Group: g.Group, instanceDoc: in}
		}
	}
	return out
}

// createdAt is when each instance's "created" event says it was
// provisioned, for the instances this watch created and still remembers.
func createdAt(evs []status.Event) map[string]time.Time {
	out := map[string]time.Time{}
	for _, e := range evs {
		if e.Kind == status.EventCreated && e.Instance != "" {
			out[string(e.Instance)] = e.Time
		}
	}
	return out
}
