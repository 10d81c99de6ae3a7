//go:build race

package ingress

// raceEnabled: the race detector slows provider calls several times over,
// so timing budgets are not checked under it.
const raceEnabled = true
