//! Feature `rdma`: compiles the verbs shim (ibv_post_send and ibv_poll_cq are static inline
//! functions in <infiniband/verbs.h>, so Rust cannot call them through plain FFI) and links
//! libibverbs. Without the feature there is nothing to build.

fn main() {
    println!("cargo:rerun-if-changed=csrc/verbs_shim.c");
    #[cfg(feature = "rdma")]
    {
        cc::Build::new().file("csrc/verbs_shim.c").warnings(true).compile("goblin_verbs_shim");
        println!("cargo:rustc-link-lib=ibverbs");
    }
}
