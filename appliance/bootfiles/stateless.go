package bootfiles

import (
	"fmt"
	"net"
	"strings"

	"github.com/rollcall/rollcall/store"
)

// Stateless boots (issue 20): a machine assigned to a profile boots the
// profile's image into RAM: its kernel and initrd, the squashfs fetched by
// the initrd over HTTP (rollcall.root=, checked against rollcall.root_sha256=),
// the node's hostname and the node token its rollcall-overlay sends for its
// files. Anything missing (the node record, the profile, the image or one
// of its three files) makes the machine wait with the reason.

// statelessBoot is what a stateless boot reads in the boot answer's
// transaction; why says what is missing.
type statelessBoot struct {
	node    store.StatelessNode
	profile store.Profile
	image   store.Image
	why     string
}

func readStatelessBoot(tx *store.Tx, machine string) statelessBoot {
	var b statelessBoot
	var err error
	if b.node, err = tx.StatelessNode(machine); err != nil {
		b.why = fmt.Sprintf("machine %s has no stateless node record", machine)
		return b
	}
	if b.profile, err = tx.Profile(b.node.Profile); err != nil {
		b.why = fmt.Sprintf("node %s: profile %q is gone", b.node.Name, b.node.Profile)
		return b
	}
	im := b.profile.Image
	if b.image, err = tx.Image(im); err != nil {
		b.why = fmt.Sprintf("profile %s: no image %q yet: import one with rollcall image import %s -kernel F -initrd F -squashfs F", b.profile.Name, im, im)
		return b
	}
	for _, f := range []string{"kernel", "initrd", "squashfs"} {
		if _, ok := b.image.File(f); !ok {
			b.why = fmt.Sprintf("profile %s: image %s has no %s: import it again with -kernel F -initrd F -squashfs F", b.profile.Name, im, f)
			return b
		}
	}
	return b
}

// statelessBoot fills a stateless boot answer, or makes it wait.
func (s *Server) statelessBoot(data BootData, b statelessBoot, host string) (BootData, error) {
	if b.why != "" {
		data.Action, data.Message = "wait", b.why
		return data, nil
	}
	tok, err := s.conf.NodeToken(b.node.Machine, b.node.Generation)
	if err != nil {
		return data, err
	}
	base := "http://" + host
	images := base + "/images/" + b.image.Name
	sq, _ := b.image.File("squashfs")
	data.Node, data.Profile = b.node.Name, b.profile.Name
	data.Kernel, data.Initrd = images+"/kernel", images+"/initrd"
	args := []string{"rollcall.mode=stateless", "rollcall.server=" + base}
	args = append(args, s.tlsArgs(host)...)
	args = append(args, "rollcall.node="+tok, "rollcall.root="+images+"/squashfs", "rollcall.root_sha256="+sq.SHA256, "hostname="+b.node.Name)
	if a := strings.TrimSpace(b.profile.Args); a != "" {
		args = append(args, a)
	}
	data.Args = strings.Join(args, " ")
	return data, nil
}

// tlsArgs are rollcall.tls= (the node's HTTPS address as the client
// reaches it) and rollcall.ca= (the CA's fingerprint), where configured.
func (s *Server) tlsArgs(host string) []string {
	var args []string
	if httpsAddr := s.conf.HTTPSAddr(); httpsAddr != "" {
		h, _, err := net.SplitHostPort(host)
		if err != nil {
			h = host
		}
		_, port, _ := net.SplitHostPort(httpsAddr)
		args = append(args, "rollcall.tls=https://"+net.JoinHostPort(h, port))
	}
	if s.conf.CAFingerprint != nil {
		if fp := s.conf.CAFingerprint(); fp != "" {
			args = append(args, "rollcall.ca="+fp)
		}
	}
	return args
}
