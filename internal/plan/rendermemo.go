package plan

import (
	"encoding/json"
	"hash/maphash"
	"maps"
	"sync"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller/enrollment"
	"github.com/infrakit/infrakit/sdk/instance"
)

// RenderMemo remembers the authorization properties rendered for each
// member of each enrollment, so that a caller that plans the same
// enrollments again and again (watch: every pass that acts on a source
// group, every sync) renders only the members that joined or changed.
// Rendering evaluates the target's HCL expression per member; for 10,000
// enrolled members it was 40 % of a healing watch's CPU. A member's entry
// is reused while its description (ID, logical ID, tags, properties,
// address) and the target's expression and scope are what they were; the
// entries of members no longer listed are dropped once they are a quarter
// of the table (see nextTable). The zero value is ready; a nil *RenderMemo
// renders every member. It is safe for concurrent use.
type RenderMemo struct {
	mu    sync.Mutex
	seed  maphash.Seed
	ready bool
	// tables are by enrollment name; a table is never changed once
	// stored (a plan builds the next one), so a plan reads it unlocked.
	tables map[string]*renderTable
}

type renderTable struct {
	target  uint64
	members map[instance.ID]renderedProps
}

type renderedProps struct {
	sum   uint64
	props enrollment.Rendered
}

// table is enrollment name's table and the memo's seed.
func (m *RenderMemo) table(name string) (*renderTable, maphash.Seed) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.ready {
		m.seed, m.tables, m.ready = maphash.MakeSeed(), map[string]*renderTable{}, true
	}
	return m.tables[name], m.seed
}

func (m *RenderMemo) store(name string, t *renderTable) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.tables[name] = t
}

// memoRender wraps render (which renders one description for enrollment
// e) with memo, and reads what it rendered (enrollment.RenderedOf); the
// returned done stores what this plan rendered as the enrollment's next
// table. With a nil memo it renders every description.
//
// The next table is the old one while no member was rendered afresh and
// few of its entries are of members no longer listed (a plan of 10,000
// unchanged members builds no map), else a copy with the fresh entries
// and, once the departed are many, without theirs.
func memoRender(memo *RenderMemo, e *config.Enrollment, render func(instance.Description) (json.RawMessage, error)) (
	func(instance.Description) (enrollment.Rendered, error), func()) {
	if memo == nil {
		return func(d instance.Description) (enrollment.Rendered, error) {
			props, err := render(d)
			return enrollment.RenderedOf(props), err
		}, func() {}
	}
	old, seed := memo.table(e.Name)
	target := targetSum(seed, &e.Target)
	if old != nil && old.target != target {
		old = nil
	}
	var (
		mu    sync.Mutex // render may be called from several goroutines
		hits  []instance.ID
		fresh = map[instance.ID]renderedProps{}
	)
	return func(d instance.Description) (enrollment.Rendered, error) {
			sum := descriptionSum(seed, d)
			if old != nil {
				if r, ok := old.members[d.ID]; ok && r.sum == sum {
					mu.Lock()
					hits = append(hits, d.ID)
					mu.Unlock()
					return r.props, nil
				}
			}
			props, err := render(d)
			if err != nil {
				return enrollment.Rendered{}, err
			}
			r := renderedProps{sum: sum, props: enrollment.RenderedOf(props)}
			mu.Lock()
			fresh[d.ID] = r
			mu.Unlock()
			return r.props, nil
		}, func() {
			memo.store(e.Name, nextTable(old, target, hits, fresh))
		}
}

// nextTable is the table a plan leaves: old (nil: none) with fresh added,
// where hits are the members whose old entry the plan used. Entries of
// members the plan did not list stay while they are at most a quarter of
// the table, so that a member leaving does not copy the table.
func nextTable(old *renderTable, target uint64, hits []instance.ID, fresh map[instance.ID]renderedProps) *renderTable {
	if old == nil {
		return &renderTable{target: target, members: fresh}
	}
	if departed := len(old.members) - len(hits); departed*4 > len(old.members) {
		members := make(map[instance.ID]renderedProps, len(hits)+len(fresh))
		for _, id := range hits {
			members[id] = old.members[id]
		}
		maps.Copy(members, fresh)
		return &renderTable{target: target, members: members}
	}
	if len(fresh) == 0 {
		return old
	}
	members := maps.Clone(old.members)
	maps.Copy(members, fresh)
	return &renderTable{target: target, members: members}
}

// targetSum is what a rendering depends on besides the member: the
// target's expression and the values of the scope it refers to.
func targetSum(seed maphash.Seed, t *config.EnrollmentTarget) uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	h.WriteString(t.Properties)
	h.WriteByte(0)
	scope, _ := json.Marshal(t.Scope) // a map's keys are sorted
	h.Write(scope)
	return h.Sum64()
}

// descriptionSum is what config.MemberValue reads of d.
func descriptionSum(seed maphash.Seed, d instance.Description) uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	field := func(s string) {
		h.WriteString(s)
		h.WriteByte(0)
	}
	field(string(d.ID))
	field(d.Address)
	if d.LogicalID != nil {
		h.WriteByte(1)
		field(string(*d.LogicalID))
	} else {
		h.WriteByte(0)
	}
	h.Write(d.Properties)
	h.WriteByte(0)
	// The tags in any order: the sum of each pair's hash.
	var tags uint64
	var th maphash.Hash
	th.SetSeed(seed)
	for k, v := range d.Tags {
		th.Reset()
		th.WriteString(k)
		th.WriteByte(0)
		th.WriteString(v)
		tags += th.Sum64()
	}
	var b [8]byte
	for i := range b {
		b[i] = byte(tags >> (8 * i))
	}
	h.Write(b[:])
	return h.Sum64()
}
