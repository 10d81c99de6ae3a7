//go:build !race

package enrollment

const raceEnabled = false
