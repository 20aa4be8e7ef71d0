// Command stateless-image builds the stateless test image's root
// (lab/statelessimage) into OUT/root.squashfs; `make stateless-image`.
// Run it from the repository's root.
//
//	go run ./lab/statelessimage/cmd/stateless-image -out bin/stateless-image
package main

import (
	"flag"
	"log"
	"os"
	"strconv"

	"github.com/rollcall/rollcall/lab/statelessimage"
)

func main() {
	out := flag.String("out", "bin/stateless-image", "output directory")
	flag.Parse()
	log.SetFlags(0)
	epoch, _ := strconv.ParseInt(os.Getenv("SOURCE_DATE_EPOCH"), 10, 64)
	if _, err := statelessimage.Build(statelessimage.Options{Out: *out, Epoch: epoch, Log: os.Stderr}); err != nil {
		log.Fatal(err)
	}
}
