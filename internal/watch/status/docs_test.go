package status

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
)

// docPath is the user documentation of watch, whose examples must stay true.
const docPath = "../../../website/watch.md"

// jsonBlockAfter returns the first ```json block after heading in doc.
func jsonBlockAfter(t *testing.T, doc, heading string) []byte {
	t.Helper()
	i := strings.Index(doc, heading)
	if i < 0 {
		t.Fatalf("%s lacks %q", docPath, heading)
	}
	rest := doc[i:]
	start := strings.Index(rest, "```json\n")
	if start < 0 {
		t.Fatalf("%s: no JSON example after %q", docPath, heading)
	}
	rest = rest[start+len("```json\n"):]
	end := strings.Index(rest, "```")
	if end < 0 {
		t.Fatalf("%s: unterminated JSON example after %q", docPath, heading)
	}
	return []byte(rest[:end])
}

// The examples on the documentation page have exactly the served shape:
// the status example is the golden document (layout aside) and the events
// example decodes field for field.
func TestDocExamples(t *testing.T) {
	b, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)

	var fromDoc, fromGolden any
	if err := json.Unmarshal(jsonBlockAfter(t, doc, "### `GET /v1/status`"), &fromDoc); err != nil {
		t.Fatalf("status example: %v", err)
	}
	golden, err := os.ReadFile("testdata/status.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(golden, &fromGolden); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fromDoc, fromGolden) {
		t.Errorf("the /v1/status example in %s differs from testdata/status.json", docPath)
	}

	// The scale_out example has exactly the served shape.
	so := jsonBlockAfter(t, doc, "The `scale_out` object")
	sdec := json.NewDecoder(bytes.NewReader(so))
	sdec.DisallowUnknownFields()
	var soDoc ScaleOut
	if err := sdec.Decode(&soDoc); err != nil {
		t.Fatalf("scale_out example: %v", err)
	}
	var soRaw, soServed map[string]any
	served, _ := json.Marshal(soDoc.clone())
	_ = json.Unmarshal(so, &soRaw)
	_ = json.Unmarshal(served, &soServed)
	if !reflect.DeepEqual(soRaw, soServed) {
		t.Errorf("the scale_out example lacks fields the status serves:\n%s\nserved %s", so, served)
	}

	ex := jsonBlockAfter(t, doc, "### `GET /v1/events`")
	dec := json.NewDecoder(bytes.NewReader(ex))
	dec.DisallowUnknownFields()
	var events []Event
	if err := dec.Decode(&events); err != nil {
		t.Fatalf("events example: %v", err)
	}
	var raw []map[string]any
	if err := json.Unmarshal(ex, &raw); err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(Event{})
	var keys map[string]any
	_ = json.Unmarshal(want, &keys)
	for i, e := range raw {
		if len(e) != len(keys) {
			t.Errorf("events example %d has %d fields, an event has %d", i, len(e), len(keys))
		}
	}

	for _, name := range []string{
		MetricPassDuration, MetricPasses, MetricLastPass, MetricInstances, MetricGroupDesiredSize,
		MetricGroupBraked, MetricBrakeEngaged, MetricReplacements, MetricProviderErrors, MetricProviderRestarts, MetricLeader,
		MetricGroupPasses, MetricLeasesHeld, MetricLeaseMoves, MetricFencedWritesRefused,
	} {
		if !strings.Contains(doc, "| `"+name+"` |") {
			t.Errorf("%s does not list %s in its metrics table", docPath, name)
		}
	}
	for _, k := range []EventKind{EventCreated, EventDestroyed, EventReplaced, EventDrained, EventBrake,
		EventBrakeReleased, EventRateLimited, EventRollStarted, EventRollStopped, EventRollDone,
		EventProviderRestart, EventError, EventReload, EventLeader, EventLease} {
		if !strings.Contains(doc, "`"+string(k)+"`") {
			t.Errorf("%s does not list the event kind %s", docPath, k)
		}
	}
	if !strings.Contains(doc, DefaultListen) {
		t.Errorf("%s does not give the default listen address %s", docPath, DefaultListen)
	}
}
