package ui

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/infrakit/infrakit/internal/watch/status"
)

// overviewEvents is how many recent events the overview lists; groupEvents
// how many of its own a group page lists; eventsPage the events page's.
const (
	overviewEvents = 20
	groupEvents    = 50
	eventsPage     = 200
	// eventsForAges is how many events a group page reads to find when its
	// instances were created.
	eventsForAges = 1000
)

// reads runs the API reads of one page at once. The first is the page's
// own: its failure fails the page. A later one that fails leaves its
// section saying why (unless it wants the token: then the page does).
//
// A visitor who has not signed in may still read (watch -public-read), or
// be asked to sign in: the first read goes alone then, so that a refusal
// is one refusal in watch's log and metrics, not one per read.
type reads struct {
	c    caller
	r    *http.Request
	eg   errgroup.Group
	errs []*error
	// probe: the first read goes alone; refused: it wanted the token,
	// and nothing more is read.
	probe, refused bool
}

func (s *site) reads(r *http.Request) *reads {
	c := s.readCaller(r)
	return &reads{c: c, r: r, probe: c.token == ""}
}

// get reads path into v in the background; its error goes to *errp.
func (rs *reads) get(path string, v any, errp *string) {
	slot := new(error)
	rs.errs = append(rs.errs, slot)
	read := func() error {
		err := rs.c.get(rs.r.Context(), path, v)
		*slot = err
		if err != nil && errp != nil {
			*errp = err.Error()
		}
		return nil
	}
	switch {
	case rs.refused:
	case rs.probe && len(rs.errs) == 1:
		_ = read()
		rs.refused = unauthorized(*slot)
	default:
		rs.eg.Go(read)
	}
}

// wait returns the error that fails the page: the first read's, else a
// want of the token.
func (rs *reads) wait() error {
	_ = rs.eg.Wait()
	if len(rs.errs) > 0 && *rs.errs[0] != nil {
		return *rs.errs[0]
	}
	for _, err := range rs.errs {
		if unauthorized(*err) {
			return *err
		}
	}
	return nil
}

// newestFirst reverses the API's oldest-first order, keeping at most n.
func newestFirst(evs []status.Event, n int) []status.Event {
	out := slices.Clone(evs)
	slices.Reverse(out)
	if len(out) > n {
		out = out[:n]
	}
	return out
}

func lastSeq(evs []status.Event) uint64 {
	var seq uint64
	for _, e := range evs {
		seq = max(seq, e.Seq)
	}
	return seq
}

// overviewPage is the stack at a glance.
type overviewPage struct {
	Status status.Status
	State  stateDoc
	// Groups are the groups of the status, then those only the state
	// names (not observed by a pass yet).
	Groups []overviewGroup
	// Rolling and Braked are the groups with a rolling update in progress
	// and with the mass-failure brake engaged.
	Rolling, Braked []status.Group
	// LoadBalancers are those of the state's ingresses.
	LoadBalancers []lbRef
	// Members are, in scale-out mode, the watch processes sharing the
	// stack, with how many objects each owns.
	Members []memberRef
	Events  []status.Event
	// StateErr and EventsErr say why a section could not be read.
	StateErr, EventsErr string
}

type overviewGroup struct {
	status.Group
	// Observed: a pass reported the group (its counts are known).
	Observed      bool
	Freed         bool
	UpdateStopped bool
	// Elsewhere: in scale-out mode, another watch process owns the group
	// (Owner names it; "" while nobody does), so this one does not list it.
	Elsewhere bool
}

// memberRef is one watch process of a scale-out stack.
type memberRef struct {
	status.Member
	Owns int
	// Me: the process serving this page.
	Me bool
}

// scaleOutView is the overview's share of the scale-out status: the
// members, and each group's owner by name.
func scaleOutView(so *status.ScaleOut) (members []memberRef, owners map[string]string) {
	if so == nil {
		return nil, nil
	}
	owns := map[string]int{}
	owners = map[string]string{}
	for _, o := range so.Objects {
		owns[o.Owner]++
		if o.Kind == "group" {
			owners[o.Name] = o.OwnerIdentity
		}
	}
	for _, m := range so.Members {
		members = append(members, memberRef{Member: m, Owns: owns[m.ID], Me: m.ID == so.Member})
	}
	return members, owners
}

// lbRef is a load balancer of an ingress and the groups routed to it.
type lbRef struct {
	Name    string
	Ingress string
	Freed   bool
	Groups  []string
}

func (st stateDoc) loadBalancers() []lbRef {
	var out []lbRef
	for _, in := range st.Ingresses {
		for _, lb := range in.LoadBalancers {
			out = append(out, lbRef{Name: lb.LoadBalancer, Ingress: in.Ingress, Freed: in.Freed, Groups: lb.Groups})
		}
	}
	return out
}

func (st stateDoc) group(name string) (stateGroup, bool) {
	for _, g := range st.Groups {
		if g.Group == name {
			return g, true
		}
	}
	return stateGroup{}, false
}

func (s *site) overview(w http.ResponseWriter, r *http.Request) {
	var p overviewPage
	var evs []status.Event
	rs := s.reads(r)
	rs.get("/v1/status", &p.Status, nil)
	rs.get("/v1/state", &p.State, &p.StateErr)
	rs.get("/v1/events?limit="+strconv.Itoa(overviewEvents), &evs, &p.EventsErr)
	if err := rs.wait(); err != nil {
		s.fail(w, r, err)
		return
	}
	var owners map[string]string
	p.Members, owners = scaleOutView(p.Status.ScaleOut)
	seen := map[string]bool{}
	for _, g := range p.Status.Groups {
		seen[g.Name] = true
		og := overviewGroup{Group: g, Observed: true}
		if sg, ok := p.State.group(g.Name); ok {
			og.Freed, og.UpdateStopped = sg.Freed, sg.UpdateStopped
		}
		p.Groups = append(p.Groups, og)
		if g.Rolling.Outdated > 0 || g.Rolling.InFlight > 0 {
			p.Rolling = append(p.Rolling, g)
		}
		if g.Brake.Engaged {
			p.Braked = append(p.Braked, g)
		}
	}
	for _, sg := range p.State.Groups {
		if !seen[sg.Group] {
			og := overviewGroup{Group: status.Group{Name: sg.Group, Owner: owners[sg.Group]}, Freed: sg.Freed, UpdateStopped: sg.UpdateStopped,
				Elsewhere: p.Status.ScaleOut != nil}
			if sg.Size != nil {
				og.Desired = *sg.Size
			} else {
				og.Desired = len(sg.LogicalIDs)
			}
			p.Groups = append(p.Groups, og)
		}
	}
	p.LoadBalancers = p.State.loadBalancers()
	p.Events = newestFirst(evs, overviewEvents)
	title := "Overview"
	if p.State.Stack != "" {
		title = "Stack " + p.State.Stack
	}
	s.render(w, r, http.StatusOK, "overview", layout{Title: title, Nav: "overview", Live: true, LastSeq: lastSeq(evs), Page: p})
}

// groupPage is one group: its instances, its counts and its events.
type groupPage struct {
	Name string
	Doc  groupDoc
	// Status is the group as watch's latest pass saw it; nil before one.
	Status *status.Group
	Pets   bool
	// Desired is the size, or the number of logical IDs (from the status).
	Desired                       int
	Running, Pending              int
	Healthy, Unhealthy, Unknown   int
	Rows                          []instanceRow
	LoadBalancers                 []lbRef
	Enrollments                   []stateEnrolled
	Events                        []status.Event
	StatusErr, StateErr, EventErr string
}

type instanceRow struct {
	instanceDoc
	// Created is when this watch created it; zero when it does not know.
	Created time.Time
}

func (s *site) group(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	p := groupPage{Name: name}
	var st status.Status
	var state stateDoc
	var evs []status.Event
	rs := s.reads(r)
	rs.get("/v1/groups/"+url.PathEscape(name), &p.Doc, nil)
	rs.get("/v1/status", &st, &p.StatusErr)
	rs.get("/v1/state", &state, &p.StateErr)
	rs.get("/v1/events?limit="+strconv.Itoa(eventsForAges), &evs, &p.EventErr)
	if err := rs.wait(); err != nil {
		s.fail(w, r, err)
		return
	}
	for i := range st.Groups {
		if st.Groups[i].Name == name {
			p.Status = &st.Groups[i]
		}
	}
	p.Pets = p.Doc.Size == nil
	switch {
	case p.Doc.Size != nil:
		p.Desired = *p.Doc.Size
	case p.Status != nil:
		p.Desired = p.Status.Desired
	default:
		if sg, ok := state.group(name); ok {
			p.Desired = len(sg.LogicalIDs)
		}
	}
	created := createdAt(evs)
	for _, in := range p.Doc.Instances {
		switch in.State {
		case "pending":
			p.Pending++
		case "terminating":
		default:
			p.Running++
		}
		switch in.Health {
		case "healthy":
			p.Healthy++
		case "unhealthy":
			p.Unhealthy++
		default:
			p.Unknown++
		}
		p.Rows = append(p.Rows, instanceRow{instanceDoc: in, Created: created[in.ID]})
	}
	for _, lb := range state.loadBalancers() {
		if slices.Contains(lb.Groups, name) {
			p.LoadBalancers = append(p.LoadBalancers, lb)
		}
	}
	for _, en := range state.Enrollments {
		if en.Source == name {
			p.Enrollments = append(p.Enrollments, en)
		}
	}
	var own []status.Event
	for _, e := range evs {
		if e.Group == name {
			own = append(own, e)
		}
	}
	p.Events = newestFirst(own, groupEvents)
	s.render(w, r, http.StatusOK, "group", layout{Title: "Group " + name, Live: true, LastSeq: lastSeq(evs), Group: name, Page: p})
}

// loadBalancerPage is one load balancer: its routes and its backends, each
// backend named by the group member it is.
type loadBalancerPage struct {
	Name     string
	Routes   routesDoc
	Backends []backendRow
	// Ref is the ingress that routes to it, if the state has one.
	Ref                         *lbRef
	BackendsErr, GroupsErr, Err string
}

type backendRow struct {
	ID string
	// Member is the group member the backend is; nil when no group has
	// an instance of that ID.
	Member *member
}

func (s *site) loadBalancer(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	p := loadBalancerPage{Name: name}
	var backends backendsDoc
	var groups []groupDoc
	var state stateDoc
	rs := s.reads(r)
	rs.get("/v1/loadbalancers/"+url.PathEscape(name)+"/routes", &p.Routes, nil)
	rs.get("/v1/loadbalancers/"+url.PathEscape(name)+"/backends", &backends, &p.BackendsErr)
	rs.get("/v1/groups", &groups, &p.GroupsErr)
	rs.get("/v1/state", &state, &p.Err)
	if err := rs.wait(); err != nil {
		s.fail(w, r, err)
		return
	}
	members := membersByID(groups)
	for _, id := range backends.Backends {
		row := backendRow{ID: id}
		if m, ok := members[id]; ok {
			row.Member = &m
		}
		p.Backends = append(p.Backends, row)
	}
	for _, lb := range state.loadBalancers() {
		if lb.Name == name {
			p.Ref = &lb
			break
		}
	}
	s.render(w, r, http.StatusOK, "loadbalancer", layout{Title: "Load balancer " + name, Page: p})
}

// enrollmentPage is one enrollment: the target's authorizations, each
// named by the member it is for.
type enrollmentPage struct {
	Name string
	// Source is the enrollment's source group, from the state.
	Source         string
	Freed          bool
	Authorizations []authorizationRow
	GroupsErr      string
	StateErr       string
}

type authorizationRow struct {
	ID, SourceID, Properties string
	Member                   *member
}

func (s *site) enrollment(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	p := enrollmentPage{Name: name}
	var doc enrollmentDoc
	var groups []groupDoc
	var state stateDoc
	rs := s.reads(r)
	rs.get("/v1/enrollments/"+url.PathEscape(name), &doc, nil)
	rs.get("/v1/groups", &groups, &p.GroupsErr)
	rs.get("/v1/state", &state, &p.StateErr)
	if err := rs.wait(); err != nil {
		s.fail(w, r, err)
		return
	}
	for _, en := range state.Enrollments {
		if en.Enrollment == name {
			p.Source, p.Freed = en.Source, en.Freed
		}
	}
	members := membersByID(groups)
	for _, a := range doc.Authorizations {
		row := authorizationRow{ID: a.ID, SourceID: a.SourceID, Properties: compact(a.Properties)}
		if m, ok := members[a.SourceID]; ok {
			row.Member = &m
		}
		p.Authorizations = append(p.Authorizations, row)
	}
	s.render(w, r, http.StatusOK, "enrollment", layout{Title: "Enrollment " + name, Page: p})
}

// eventsPage is the recent events, newest first, maybe of one group.
type eventsPageData struct {
	Group  string
	Groups []string
	Events []status.Event
	Total  int
}

func (s *site) events(w http.ResponseWriter, r *http.Request) {
	group := r.URL.Query().Get("group")
	var evs []status.Event
	var st status.Status
	rs := s.reads(r)
	limit := eventsPage
	if group != "" {
		limit = eventsForAges
	}
	rs.get("/v1/events?limit="+strconv.Itoa(limit), &evs, nil)
	rs.get("/v1/status", &st, nil)
	if err := rs.wait(); err != nil {
		s.fail(w, r, err)
		return
	}
	p := eventsPageData{Group: group}
	for _, g := range st.Groups {
		p.Groups = append(p.Groups, g.Name)
	}
	var kept []status.Event
	for _, e := range evs {
		if group == "" || e.Group == group {
			kept = append(kept, e)
		}
	}
	p.Total = len(kept)
	p.Events = newestFirst(kept, eventsPage)
	s.render(w, r, http.StatusOK, "events", layout{Title: "Events", Nav: "events", Live: true, LastSeq: lastSeq(evs), Group: group, Page: p})
}
