/* tools/cluster_ns.h — several clusters in one repository (tools/cluster_ns.c). */
#ifndef PB_TOOLS_CLUSTER_NS_H
#define PB_TOOLS_CLUSTER_NS_H

#include "tools/commands.h"

#define CNS_PREFIX "cluster/"   /* a named cluster's objects: cluster/NAME/<key> */
#define CNS_MARKERS "clusters/" /* root entries: clusters/NAME says where NAME lives */

typedef enum cns_layout { CNS_ROOT, CNS_NAMESPACE } cns_layout;

/* PB_EINVAL naming the name when it cannot be a key component. */
int cns_check_name(const char *name, pb_error *err);
/* "<root>/cluster/<name>" (trailing slashes of root dropped) into out. */
void cns_location(const char *root, const char *name, char *out, size_t cap);
/* Where cluster name lives, from its root entry; PB_ENOENT when it has none. */
int cns_read_marker(repo *root, const char *name, cns_layout *out, pb_error *err);
/* With o->cluster set: point o->repo.location at the cluster's namespace (keeping the
 * configured location in o->repo_root), or leave it at the root when the cluster owns a
 * repository written before namespaces. backup and archive-push record a cluster's entry
 * the first time; other commands write nothing. */
int cns_resolve(pb_options *o, pb_error *err);

#endif
