// Package e2e holds end-to-end tests that run the real binaries: TestMain
// builds bin/infrakit and the shipped providers into a temporary directory,
// and every test works in a scratch copy of a stack, running `infrakit`
// commands as a user would and checking what they print, their exit codes,
// and what the simulator provider holds on disk
// (.infrakit/simulator in the scratch directory).
//
// The package has no non-test code; this file only documents it.
package e2e
