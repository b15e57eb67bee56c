/* -*- P4_16 -*- */
/*
 * kvswitch: the trust boundary (docs/dataplane.md, "Trust").
 *
 * Which device sits behind each ingress port.  Only STORAGE and FABRIC
 * ports may fill a slot or raise its min-version; replies from HOST ports
 * (the default: a port the controller did not describe is untrusted) are
 * forwarded marked F_BYPASS and never stored; controller-only opcodes from
 * them are dropped (validate.p4: is_reply, is_controller_only).
 *
 * Reads: the ingress port.  Writes: the sender's role.
 */

control PortRole(in bit<9> ingress_port, inout port_role_t sender) {

    @name(".MyIngress.set_port_role")
    action set_port_role(port_role_t role) {
        sender = role;
    }

    /* The controller installs STORAGE for ports leading to storage nodes */
    /* and FABRIC for links to other switches (hosts.json "ports").       */
    @name(".MyIngress.port_role")
    table port_role {
        key = {
            ingress_port: exact @name("ingress_port");
        }
        actions = {
            set_port_role;
        }
        size = 512;  /* every bit<9> port */
        default_action = set_port_role(port_role_t.HOST);
    }

    apply {
        port_role.apply();
    }
}
