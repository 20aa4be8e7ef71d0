// Command deploy-image builds the deploy tests' disk images (package
// lab/deployimage) and prints where they are:
//
//	go run ./lab/deployimage/cmd/deploy-image                 # the tiny ext4 image (make e2e)
//	go run ./lab/deployimage/cmd/deploy-image -rootfs xfs     # the tiny image on XFS
//	go run ./lab/deployimage/cmd/deploy-image -debian         # Debian with cloud-init, raw + qcow2 (make e2e-full)
//
// With -out DIR the image is also linked into DIR as disk.raw (and
// disk.qcow2), so that a Makefile target has a fixed path.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"

	"github.com/rollcall/rollcall/lab/deployimage"
)

func main() {
	out := flag.String("out", "", "also link the image into this directory as disk.raw (and disk.qcow2)")
	size := flag.Int64("size-mib", 0, "disk size in MiB (default: 128 tiny ext4, 352 tiny XFS, 2048 Debian)")
	rootfs := flag.String("rootfs", "ext4", "root file system of the tiny image: ext4 or xfs")
	debian := flag.Bool("debian", false, "build the Debian root with real cloud-init (mmdebstrap, from Debian's packages)")
	suite := flag.String("suite", "", "Debian suite for -debian (default: the host's)")
	dir := flag.String("cache", "", "where built images are kept (default: the module's bin/deploy-image)")
	flag.Parse()
	log.SetFlags(0)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	img, err := deployimage.BuildImage(ctx, deployimage.Options{Dir: *dir, Size: *size << 20, RootFS: *rootfs, Debian: *debian, Suite: *suite, Log: os.Stderr})
	if err != nil {
		log.Fatal(err)
	}
	how := "built"
	if img.Cached {
		how = "cached"
	}
	fmt.Printf("raw     %s\n", img.Path)
	if img.QCOW2 != "" {
		fmt.Printf("qcow2   %s\n", img.QCOW2)
	}
	fmt.Printf("root    UUID %s\n", img.RootUUID)
	fmt.Printf("%s in %s\n", how, img.Took.Round(100_000_000))
	if *out != "" {
		if err := os.MkdirAll(*out, 0o755); err != nil {
			log.Fatal(err)
		}
		for src, name := range map[string]string{img.Path: "disk.raw", img.QCOW2: "disk.qcow2"} {
			if src == "" {
				continue
			}
			dst := filepath.Join(*out, name)
			os.Remove(dst)
			if err := os.Symlink(src, dst); err != nil {
				log.Fatal(err)
			}
		}
	}
}
