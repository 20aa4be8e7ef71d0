// Command rollcall is the Rollcall appliance: `rollcall serve` runs a node;
// every other verb is a client of a node's API.
package main

import (
	"os"

	"github.com/rollcall/rollcall/appliance/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
