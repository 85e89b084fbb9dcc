// zkr_ensemble_stall — reproduces, with the ZooKeeper C client alone, the stall that zkr's
// uncontended lock cycle met on a 3-server ensemble (bench/RESULTS.md, "A stall on the 3-server
// ensemble"): a delete sent without waiting for its answer (zkr's unlock() returns at once), then
// the next cycle's create and listing. On Debian's ZooKeeper 3.8.0 ensemble the server sometimes
// answers nothing on that session until the C client times the connection out (2/3 of the session
// timeout); never on a standalone server, never when each delete is waited for.
//
//   zkr_ensemble_stall CONNECT PIPELINED(0|1) ASYNC_DELETE(0|1) SECONDS
//
// Prints one line: the cycles made, the slowest, and how many took over 50 ms.
#ifndef THREADED
#define THREADED  // libzookeeper_mt
#endif
#include <zookeeper/zookeeper.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int left, connected;
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
static char created[512];
static void w(zhandle_t *z, int type, int state, const char *p, void *c) { (void)z;(void)p;(void)c; if (type == ZOO_SESSION_EVENT && state == ZOO_CONNECTED_STATE) { pthread_mutex_lock(&mu); connected = 1; pthread_cond_broadcast(&cv); pthread_mutex_unlock(&mu);} }
static void done_one(void) { pthread_mutex_lock(&mu); if (--left == 0) pthread_cond_broadcast(&cv); pthread_mutex_unlock(&mu); }
static void on_create(int rc, const char *v, const void *d) { (void)d; if (rc == ZOK) strcpy(created, v); else fprintf(stderr, "create %d\n", rc); done_one(); }
static void on_list(int rc, const struct String_vector *s, const void *d) { (void)s;(void)d; if (rc) fprintf(stderr, "list %d\n", rc); done_one(); }
static void on_del(int rc, const void *d) { (void)d; if (rc) fprintf(stderr, "del %d\n", rc); }
static void on_del_wait(int rc, const void *d) { (void)d; if (rc) fprintf(stderr, "del %d\n", rc); done_one(); }
static void wait_all(void) { pthread_mutex_lock(&mu); while (left > 0) pthread_cond_wait(&cv, &mu); pthread_mutex_unlock(&mu); }
int main(int argc, char **argv) {
    const char *connect = argv[1]; int pipelined = atoi(argv[2]); int async_delete = atoi(argv[3]); double secs = atof(argv[4]);
    zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
    zhandle_t *zh = zookeeper_init(connect, w, 10000, 0, 0, 0);
    pthread_mutex_lock(&mu); while (!connected) pthread_cond_wait(&cv, &mu); pthread_mutex_unlock(&mu);
    char parent[64]; snprintf(parent, sizeof parent, "/pt%d", getpid());
    zoo_create(zh, parent, 0, -1, &ZOO_OPEN_ACL_UNSAFE, 0, 0, 0);
    char prefix[80]; snprintf(prefix, sizeof prefix, "%s/lock-", parent);
    double end = now() + secs, worst = 0; long n = 0, slow = 0;
    while (now() < end) {
        double s = now();
        if (pipelined) {
            left = 2;
            zoo_acreate(zh, prefix, "x", 1, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL, on_create, 0);
            zoo_aget_children(zh, parent, 0, on_list, 0);
            wait_all();
        } else {
            struct String_vector sv;
            zoo_create(zh, prefix, "x", 1, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL, created, sizeof created);
            zoo_get_children(zh, parent, 0, &sv); deallocate_String_vector(&sv);
        }
        if (async_delete) zoo_adelete(zh, created, -1, on_del, 0);
        else { left = 1; zoo_adelete(zh, created, -1, on_del_wait, 0); wait_all(); }
        double d = now() - s; if (d > worst) worst = d; if (d > 0.05) slow++; n++;
    }
    printf("pipelined=%d async_delete=%d cycles=%ld worst=%.3fs slow(>50ms)=%ld\n", pipelined, async_delete, n, worst, slow);
    zookeeper_close(zh);
    return 0;
}
