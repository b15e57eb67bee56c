/* -*- P4_16 -*- */
/*
 * kvswitch: the trust boundary (included inside control MyIngress).
 *
 * Which device sits behind each ingress port.  Only STORAGE and FABRIC
 * ports may fill a slot or raise its min-version; replies from HOST ports
 * (the default: a port the controller did not describe is untrusted) are
 * forwarded marked F_BYPASS and never stored; controller-only opcodes from
 * them are dropped (validate.p4: is_reply, is_controller_only).
 */

action set_port_role(port_role_t role) {
    meta.port_role = role;
}

/* The controller installs STORAGE for ports leading to storage nodes and */
/* FABRIC for links to other switches (hosts.json "ports").               */
table port_role {
    key = {
        std_meta.ingress_port: exact @name("ingress_port");
    }
    actions = {
        set_port_role;
    }
    size = 512;  /* every bit<9> port */
    default_action = set_port_role(port_role_t.HOST);
}
