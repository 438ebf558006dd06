/* The verbs fabric's C side (cargo feature `rdma`): one RC queue pair per connection, a
 * registered receive ring the peer writes into, a registered staging area our writes are
 * posted from, and a receive completion queue with a completion channel (the sleeper's
 * wake-up descriptor). ibv_post_send, ibv_post_recv and ibv_poll_cq are static inline
 * functions in <infiniband/verbs.h>: this file is how Rust reaches them.
 *
 * Every function returns 0 (or a count) on success and a negative value on failure, with a
 * message in the handle's `err` (or the caller's buffer when there is no handle yet). Nothing
 * here blocks: a full send queue is reported as GV_AGAIN and the Rust side retries later. */

#include <infiniband/verbs.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GV_AGAIN (-2)
/* Receives posted at any time: every write with immediate consumes one. The queue pair
 * retries forever when they run out (rnr_retry 7), so this bounds nothing but throughput. */
#define RQ_DEPTH 1024
#define SQ_DEPTH 1024
/* One send in SIGNAL_EVERY is signaled: its completion releases the unsignaled ones before it. */
#define SIGNAL_EVERY 64

struct gv_info {
    uint32_t qpn;
    uint32_t psn;
    uint16_t lid;
    uint8_t gid[16];
    uint64_t addr;
    uint32_t rkey;
};

struct gv {
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_comp_channel *ch;
    struct ibv_cq *rcq, *scq;
    struct ibv_qp *qp;
    struct ibv_mr *rx_mr, *tx_mr;
    uint8_t *rx, *tx;
    size_t rx_len, tx_len;
    uint8_t port;
    union ibv_gid gid;
    uint16_t lid;
    enum ibv_mtu mtu;
    uint32_t psn;
    uint64_t peer_addr;
    uint32_t peer_rkey;
    /* Sends posted, and sends known complete (up to the last signaled completion). */
    uint64_t posted, done;
    char err[256];
};

static void set_err(char *buf, size_t len, const char *what, int e) {
    if (e)
        snprintf(buf, len, "%s: %s", what, strerror(e));
    else
        snprintf(buf, len, "%s", what);
}

/* The number of verbs devices, and the first one's name. */
int gv_device_count(char *name, size_t len) {
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    if (!list)
        return 0;
    if (n > 0 && name && len)
        snprintf(name, len, "%s", ibv_get_device_name(list[0]));
    ibv_free_device_list(list);
    return n;
}

const char *gv_error(struct gv *g) { return g->err; }
uint8_t *gv_rx(struct gv *g) { return g->rx; }
uint8_t *gv_tx(struct gv *g) { return g->tx; }
int gv_wake_fd(struct gv *g) { return g->ch->fd; }

void gv_close(struct gv *g) {
    if (!g)
        return;
    if (g->qp) ibv_destroy_qp(g->qp);
    if (g->rcq) ibv_destroy_cq(g->rcq);
    if (g->scq) ibv_destroy_cq(g->scq);
    if (g->ch) ibv_destroy_comp_channel(g->ch);
    if (g->rx_mr) ibv_dereg_mr(g->rx_mr);
    if (g->tx_mr) ibv_dereg_mr(g->tx_mr);
    if (g->pd) ibv_dealloc_pd(g->pd);
    if (g->ctx) ibv_close_device(g->ctx);
    free(g->rx);
    free(g->tx);
    free(g);
}

/* Opens the first device (or `want`), port 1, and a queue pair in INIT with a registered
 * receive ring of rx_len bytes. */
struct gv *gv_open(const char *want, size_t rx_len, char *err, size_t errlen) {
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    if (!list || n == 0) {
        if (list) ibv_free_device_list(list);
        set_err(err, errlen,
                "no RDMA device: ibv_get_device_list found none (no RDMA NIC, and no soft-RoCE "
                "rdma_rxe or siw device is configured)", 0);
        return NULL;
    }
    struct ibv_device *dev = list[0];
    if (want) {
        dev = NULL;
        for (int i = 0; i < n; i++)
            if (strcmp(ibv_get_device_name(list[i]), want) == 0) dev = list[i];
        if (!dev) {
            ibv_free_device_list(list);
            snprintf(err, errlen, "no RDMA device named %s", want);
            return NULL;
        }
    }
    struct gv *g = calloc(1, sizeof *g);
    if (!g) {
        ibv_free_device_list(list);
        set_err(err, errlen, "calloc", ENOMEM);
        return NULL;
    }
    g->ctx = ibv_open_device(dev);
    ibv_free_device_list(list);
    if (!g->ctx) { set_err(err, errlen, "ibv_open_device", errno); goto fail; }
    g->port = 1;
    struct ibv_port_attr pa;
    if (ibv_query_port(g->ctx, g->port, &pa)) { set_err(err, errlen, "ibv_query_port", errno); goto fail; }
    if (pa.state != IBV_PORT_ACTIVE) { set_err(err, errlen, "RDMA device port 1 is not active", 0); goto fail; }
    g->lid = pa.lid;
    g->mtu = pa.active_mtu;
    /* GID index 0: the link-local GID, enough for RoCE within one L2 segment and for IB. */
    if (ibv_query_gid(g->ctx, g->port, 0, &g->gid)) { set_err(err, errlen, "ibv_query_gid", errno); goto fail; }
    g->pd = ibv_alloc_pd(g->ctx);
    if (!g->pd) { set_err(err, errlen, "ibv_alloc_pd", errno); goto fail; }
    g->ch = ibv_create_comp_channel(g->ctx);
    if (!g->ch) { set_err(err, errlen, "ibv_create_comp_channel", errno); goto fail; }
    int fl = fcntl(g->ch->fd, F_GETFL);
    if (fl < 0 || fcntl(g->ch->fd, F_SETFL, fl | O_NONBLOCK) < 0) {
        set_err(err, errlen, "making the completion channel non-blocking", errno);
        goto fail;
    }
    g->rcq = ibv_create_cq(g->ctx, RQ_DEPTH, NULL, g->ch, 0);
    g->scq = ibv_create_cq(g->ctx, SQ_DEPTH, NULL, NULL, 0);
    if (!g->rcq || !g->scq) { set_err(err, errlen, "ibv_create_cq", errno); goto fail; }
    g->rx_len = rx_len;
    if (posix_memalign((void **)&g->rx, 4096, rx_len)) { set_err(err, errlen, "posix_memalign", ENOMEM); goto fail; }
    memset(g->rx, 0, rx_len);
    g->rx_mr = ibv_reg_mr(g->pd, g->rx, rx_len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (!g->rx_mr) { set_err(err, errlen, "ibv_reg_mr (receive ring)", errno); goto fail; }
    struct ibv_qp_init_attr qa = {
        .send_cq = g->scq,
        .recv_cq = g->rcq,
        .cap = { .max_send_wr = SQ_DEPTH, .max_recv_wr = RQ_DEPTH, .max_send_sge = 1, .max_recv_sge = 1 },
        .qp_type = IBV_QPT_RC,
        .sq_sig_all = 0,
    };
    g->qp = ibv_create_qp(g->pd, &qa);
    if (!g->qp) { set_err(err, errlen, "ibv_create_qp", errno); goto fail; }
    struct ibv_qp_attr a = {
        .qp_state = IBV_QPS_INIT,
        .pkey_index = 0,
        .port_num = g->port,
        .qp_access_flags = IBV_ACCESS_REMOTE_WRITE,
    };
    if (ibv_modify_qp(g->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
        set_err(err, errlen, "ibv_modify_qp (INIT)", errno);
        goto fail;
    }
    g->psn = (uint32_t)(((uintptr_t)g ^ (uintptr_t)g->rx) & 0xffffff);
    return g;
fail:
    gv_close(g);
    return NULL;
}

void gv_info(struct gv *g, struct gv_info *out) {
    out->qpn = g->qp->qp_num;
    out->psn = g->psn;
    out->lid = g->lid;
    memcpy(out->gid, g->gid.raw, 16);
    out->addr = (uint64_t)(uintptr_t)g->rx;
    out->rkey = g->rx_mr->rkey;
}

static int post_recv(struct gv *g) {
    /* No scatter entry: a write with immediate places its data by rkey, the receive only
     * carries the immediate. */
    struct ibv_recv_wr wr = { .wr_id = 0, .sg_list = NULL, .num_sge = 0 }, *bad;
    int e = ibv_post_recv(g->qp, &wr, &bad);
    if (e) set_err(g->err, sizeof g->err, "ibv_post_recv", e);
    return e ? -1 : 0;
}

/* Moves the queue pair to RTR and RTS towards the peer, registers a staging area of
 * peer_rx bytes (the peer's ring, mirrored) and posts the receives. */
int gv_connect(struct gv *g, const struct gv_info *p, size_t peer_rx) {
    g->tx_len = peer_rx;
    if (posix_memalign((void **)&g->tx, 4096, peer_rx)) { set_err(g->err, sizeof g->err, "posix_memalign", ENOMEM); return -1; }
    g->tx_mr = ibv_reg_mr(g->pd, g->tx, peer_rx, IBV_ACCESS_LOCAL_WRITE);
    if (!g->tx_mr) { set_err(g->err, sizeof g->err, "ibv_reg_mr (staging)", errno); return -1; }
    g->peer_addr = p->addr;
    g->peer_rkey = p->rkey;
    struct ibv_qp_attr a = {
        .qp_state = IBV_QPS_RTR,
        .path_mtu = g->mtu,
        .dest_qp_num = p->qpn,
        .rq_psn = p->psn,
        .max_dest_rd_atomic = 1,
        .min_rnr_timer = 12,
        .ah_attr = { .port_num = g->port, .dlid = p->lid, .sl = 0, .src_path_bits = 0 },
    };
    /* RoCE ports have no LID: address the peer by GID. */
    if (p->lid == 0) {
        a.ah_attr.is_global = 1;
        memcpy(a.ah_attr.grh.dgid.raw, p->gid, 16);
        a.ah_attr.grh.sgid_index = 0;
        a.ah_attr.grh.hop_limit = 64;
    }
    if (ibv_modify_qp(g->qp, &a,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)) {
        set_err(g->err, sizeof g->err, "ibv_modify_qp (RTR)", errno);
        return -1;
    }
    for (int i = 0; i < RQ_DEPTH; i++)
        if (post_recv(g)) return -1;
    struct ibv_qp_attr r = {
        .qp_state = IBV_QPS_RTS,
        .timeout = 14,
        .retry_cnt = 7,
        .rnr_retry = 7, /* forever: a peer that is slow to re-post receives only slows us */
        .sq_psn = g->psn,
        .max_rd_atomic = 1,
    };
    if (ibv_modify_qp(g->qp, &r,
                      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                          IBV_QP_MAX_QP_RD_ATOMIC)) {
        set_err(g->err, sizeof g->err, "ibv_modify_qp (RTS)", errno);
        return -1;
    }
    return 0;
}

/* Reaps send completions; a failed one fails the connection. */
static int reap_sends(struct gv *g) {
    struct ibv_wc wc[16];
    int n;
    while ((n = ibv_poll_cq(g->scq, 16, wc)) > 0) {
        for (int i = 0; i < n; i++) {
            if (wc[i].status != IBV_WC_SUCCESS) {
                snprintf(g->err, sizeof g->err, "RDMA write failed: %s", ibv_wc_status_str(wc[i].status));
                return -1;
            }
            /* wr_id of a signaled send: the count of sends posted through it. */
            g->done = wc[i].wr_id;
        }
    }
    if (n < 0) { set_err(g->err, sizeof g->err, "ibv_poll_cq (send)", 0); return -1; }
    return 0;
}

/* Posts an RDMA write with immediate of tx[pos, pos+len) to the peer's ring at pos.
 * GV_AGAIN: the send queue is full for now (nothing posted). */
int gv_write_imm(struct gv *g, size_t pos, size_t len, uint32_t imm) {
    if (reap_sends(g)) return -1;
    if (g->posted - g->done >= SQ_DEPTH - 1) return GV_AGAIN;
    struct ibv_sge sge = { .addr = (uint64_t)(uintptr_t)(g->tx + pos), .length = (uint32_t)len, .lkey = g->tx_mr->lkey };
    struct ibv_send_wr wr = {
        .sg_list = len ? &sge : NULL,
        .num_sge = len ? 1 : 0,
        .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
        .imm_data = htonl(imm),
    }, *bad;
    wr.wr.rdma.remote_addr = g->peer_addr + pos;
    wr.wr.rdma.rkey = g->peer_rkey;
    g->posted++;
    if (g->posted % SIGNAL_EVERY == 0 || g->posted - g->done >= SQ_DEPTH / 2) {
        wr.send_flags = IBV_SEND_SIGNALED;
        wr.wr_id = g->posted;
    }
    int e = ibv_post_send(g->qp, &wr, &bad);
    if (e) {
        g->posted--;
        set_err(g->err, sizeof g->err, "ibv_post_send", e);
        return -1;
    }
    return 0;
}

/* 1 and the immediate, 0 when nothing was delivered, -1 on a failed completion. */
int gv_poll(struct gv *g, uint32_t *imm) {
    if (reap_sends(g)) return -1;
    struct ibv_wc wc;
    int n = ibv_poll_cq(g->rcq, 1, &wc);
    if (n < 0) { set_err(g->err, sizeof g->err, "ibv_poll_cq (receive)", 0); return -1; }
    if (n == 0) return 0;
    if (wc.status != IBV_WC_SUCCESS) {
        snprintf(g->err, sizeof g->err, "RDMA receive failed: %s", ibv_wc_status_str(wc.status));
        return -1;
    }
    if (wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM || !(wc.wc_flags & IBV_WC_WITH_IMM)) {
        snprintf(g->err, sizeof g->err, "unexpected completion opcode %d", (int)wc.opcode);
        return -1;
    }
    *imm = ntohl(wc.imm_data);
    if (post_recv(g)) return -1;
    return 1;
}

/* Requests a completion-channel event for the next receive completion. */
int gv_arm(struct gv *g) {
    int e = ibv_req_notify_cq(g->rcq, 0);
    if (e) { set_err(g->err, sizeof g->err, "ibv_req_notify_cq", e); return -1; }
    return 0;
}

/* Consumes pending channel events (the descriptor is non-blocking) and acknowledges them. */
void gv_drain_events(struct gv *g) {
    struct ibv_cq *cq;
    void *ctx;
    unsigned n = 0;
    while (ibv_get_cq_event(g->ch, &cq, &ctx) == 0) n++;
    if (n) ibv_ack_cq_events(g->rcq, n);
}
