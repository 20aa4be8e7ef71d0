// Command build-iso makes the appliance ISO (buildroot says what is in
// it) and prints what it holds per class of driver and its size.
//
//	go run ./buildroot/cmd/build-iso -out bin/iso/rollcall.iso -commissioning bin/image   # make iso
//
// -append puts unattended answers (buildroot/initsys) on the default
// entry's kernel command line, for a fleet or a test.
package main

import (
	"flag"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/rollcall/rollcall/buildroot"
)

func main() {
	var c buildroot.Config
	flag.StringVar(&c.Out, "out", "bin/iso/rollcall.iso", "the ISO to write")
	flag.StringVar(&c.Cache, "cache", "", "directory that keeps downloaded .deb files (default: beside -out, debs)")
	flag.StringVar(&c.KernelPackage, "package", "linux-image-amd64", "Debian kernel package (a metapackage is followed)")
	flag.StringVar(&c.Commissioning, "commissioning", "bin/image", "the commissioning image's directory (vmlinuz, initrd.img); empty leaves it out")
	flag.StringVar(&c.IPXEDir, "ipxe", "/usr/lib/ipxe", "where the iPXE binaries are (Debian's ipxe); - leaves them out")
	flag.StringVar(&c.FirmwareDir, "firmware", "", "a lib/firmware tree (Debian's firmware-* packages unpacked) to take the drivers' firmware from")
	flag.StringVar(&c.Append, "append", "", "added to the default entry's kernel command line, e.g. rollcall.setup=name=rc1,addr=dhcp")
	flag.IntVar(&c.Timeout, "timeout", 3, "GRUB menu timeout in seconds")
	flag.StringVar(&c.Version, "version", "", "the version the ISO reports (default: git describe)")
	flag.Parse()
	log.SetFlags(0)
	if c.Cache == "" {
		c.Cache = filepath.Join(filepath.Dir(c.Out), "debs")
	}
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			log.Fatalf("iso: SOURCE_DATE_EPOCH=%q is not a number", s)
		}
		c.Epoch = v
	}
	if c.Version == "" {
		c.Version = gitVersion()
	}
	c.Log = os.Stderr
	r, err := buildroot.Build(c)
	if err != nil {
		log.Fatalf("iso: %v", err)
	}
	r.Print(os.Stdout)
}

func gitVersion() string {
	out, err := execOutput("git", "describe", "--always", "--dirty")
	if v := strings.TrimSpace(out); err == nil && v != "" {
		return v
	}
	return "dev"
}

func execOutput(name string, args ...string) (string, error) {
	b, err := exec.Command(name, args...).Output()
	return string(b), err
}
