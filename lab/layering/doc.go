// Package layering holds no code: its test keeps the module's dependencies
// pointing one way (STYLE.md items 1 and 19). layering_test.go is the table
// of which packages of this module each package may import, each with its
// reason, and the imports that go against the direction, each with why it
// stands; testdata/agent-deps.txt is the agent binary's whole dependency set,
// so that a new dependency of the agent shows up in review.
//
//	go test ./lab/layering                          # check
//	go test ./lab/layering -run TestAgentDeps -update # rewrite agent-deps.txt
package layering
