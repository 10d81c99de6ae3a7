package plan

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/state"
)

// Errors of CheckState, for errors.Is.
var (
	// ErrStalePlan: the state changed after the plan was made.
	ErrStalePlan = errors.New("saved plan is stale")
	// ErrOtherState: the plan was made against another state (lineage).
	ErrOtherState = errors.New("saved plan is for a different state")
)

// Save writes the whole plan as JSON (the `plan -out` file). It is compact on
// purpose: indenting would re-indent the properties inside, and the desired
// stack should come back byte for byte as it was planned.
func (p *Plan) Save(w io.Writer) error {
	if err := json.NewEncoder(w).Encode(p); err != nil {
		return fmt.Errorf("save plan: %w", err)
	}
	return nil
}

// Load reads a plan written by Save. It refuses files that are not plans,
// plans of a format this build does not know, and plans whose desired stack
// breaks the rules of the stack language (config.CheckStored).
func Load(r io.Reader) (*Plan, error) {
	var p Plan
	if err := json.NewDecoder(r).Decode(&p); err != nil {
		return nil, fmt.Errorf("load plan: not a plan file: %w", err)
	}
	switch {
	case p.FormatVersion == 0:
		return nil, errors.New("load plan: not a plan file: no format_version")
	case p.FormatVersion > FormatVersion:
		return nil, fmt.Errorf("load plan: the plan file has format %d, newer than this infrakit reads (%d): apply it with the infrakit that made it", p.FormatVersion, FormatVersion)
	case p.FormatVersion < FormatVersion:
		return nil, fmt.Errorf("load plan: the plan file has format %d, older than this infrakit reads (%d): make the plan again with infrakit plan -out", p.FormatVersion, FormatVersion)
	case p.Desired == nil:
		return nil, errors.New("load plan: the plan file holds no desired stack")
	}
	if err := Check(p.Steps); err != nil {
		return nil, fmt.Errorf("load plan: the plan file's steps are broken: %w", err)
	}
	// apply PLANFILE stores the desired stack as it is in the file: it obeys
	// the rules a stack read from files or from state does.
	if err := config.CheckStored(p.Desired); err != nil {
		return nil, fmt.Errorf("load plan: the plan file's desired stack is not valid (edited by hand, or damaged?): %w", err)
	}
	return &p, nil
}

// ErrWorldMoved: the members of a group changed after the plan was made.
var ErrWorldMoved = errors.New("the world moved since the plan was made")

// CheckWorld refuses to apply the plan when a group it acts on does not
// have the members it had when the plan was made (fingerprint, by group,
// as Fingerprint computes it from an observation now): its steps name
// members that may be gone, and miss members that came.
func (p *Plan) CheckWorld(now map[string]string) error {
	for _, g := range p.Groups {
		want, ok := p.Observed[g.Group]
		if !ok {
			continue
		}
		if got := now[g.Group]; got != want {
			return fmt.Errorf("%w: group %q does not have the members it had then; make the plan again", ErrWorldMoved, g.Group)
		}
	}
	return nil
}

// CheckState refuses to apply the plan to doc unless doc is the state the
// plan was made against, unchanged: same lineage and serial. A plan made
// before any state was stored applies only while none is stored (the
// lineage of such a new document is not compared: each new one gets a
// fresh lineage). A nil doc counts as no stored state.
func (p *Plan) CheckState(doc *state.Document) error {
	var serial uint64
	lineage := ""
	if doc != nil {
		serial, lineage = doc.Serial, doc.Lineage
	}
	switch {
	case p.StateSerial == 0 && serial == 0:
		return nil
	case p.StateSerial == 0:
		return fmt.Errorf("%w: it was made before any state existed, and the state now has serial %d; run plan again", ErrStalePlan, serial)
	case serial == 0:
		return fmt.Errorf("%w: it was made against state serial %d of lineage %s, but no state is stored now", ErrOtherState, p.StateSerial, p.StateLineage)
	case lineage != p.StateLineage:
		return fmt.Errorf("%w: it was made against state lineage %s, but the current state has lineage %s", ErrOtherState, p.StateLineage, lineage)
	case serial != p.StateSerial:
		return fmt.Errorf("%w: the state changed after the plan was made (serial %d, now %d); run plan again", ErrStalePlan, p.StateSerial, serial)
	}
	return nil
}
