// Command rollcall is the Rollcall appliance: `rollcall serve` runs a node;
// every other verb is a client of a node's API.
package main

import (
	"os"

	"github.com/rollcall/rollcall/appliance"
)

func main() {
	os.Exit(appliance.Main(os.Args[1:], os.Stdout, os.Stderr))
}
