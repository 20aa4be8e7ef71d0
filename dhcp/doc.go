// Package dhcp is the appliance's DHCPv4 server (RFC 2131, RFC 2132): full
// mode hands out addresses, proxy mode only boot files (PXE 2.1 spec), on
// every interface of a VLAN this node serves, with PXE, iPXE and UEFI HTTP
// boot answers.
//
// It owns its sockets (one per interface and port, bound with
// SO_BINDTODEVICE, with IP_PKTINFO so it knows where each request arrived),
// runs a handler per network (package full or proxy, both wire.Handlers)
// and sends each reply where RFC 2131 §4.1 says: to the relay at giaddr:67,
// NAKs broadcast, to ciaddr:68 when the client has an address, port-4011
// requests back to their source, otherwise broadcast.
//
// A reply never exceeds what its client said it takes (option 57, RFC 2132
// §9.10, read as the IP datagram; 548 bytes of DHCP message without it, RFC
// 2131 §2): options past that are dropped in wire.Fit's order, counted and
// logged. A network whose essential answer cannot fit 548 bytes is refused
// when the service is built. Requests from no real NIC (broadcast,
// multicast or zero chaddr) are dropped, and the options a reply echoes or
// a lease records (61, 82, 97, 12) are bounded first (wire.CheckOptions).
//
// Dynamic leases come from blocks this node owns through Raft (package
// lease); it reads the local store and writes only through the Replicator
// and Housekeeper it is given, never importing the Raft package itself.
package dhcp
