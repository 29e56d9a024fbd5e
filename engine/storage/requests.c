/*
 * Object-store request counters (repo_requests): what a command cost in requests, the
 * figure users pay for on S3. Counted per repository handle; the S3 driver counts every
 * HTTP attempt itself, other drivers one per operation (storage.c).
 */
#include "engine/storage/storage_internal.h"

#include <stdio.h>

void repo_requests_add(repo_requests *q, repo_req_kind kind)
{
    uint64_t *f = kind == REPO_REQ_GET         ? &q->get
                  : kind == REPO_REQ_GET_RANGE ? &q->get_range
                  : kind == REPO_REQ_PUT       ? &q->put
                  : kind == REPO_REQ_LIST      ? &q->list
                  : kind == REPO_REQ_HEAD      ? &q->head
                                               : &q->del;
    __atomic_fetch_add(f, 1, __ATOMIC_RELAXED);
}

void repo_requests_load(const repo_requests *q, repo_requests *out)
{
    out->get = __atomic_load_n(&q->get, __ATOMIC_RELAXED);
    out->get_range = __atomic_load_n(&q->get_range, __ATOMIC_RELAXED);
    out->put = __atomic_load_n(&q->put, __ATOMIC_RELAXED);
    out->list = __atomic_load_n(&q->list, __ATOMIC_RELAXED);
    out->head = __atomic_load_n(&q->head, __ATOMIC_RELAXED);
    out->del = __atomic_load_n(&q->del, __ATOMIC_RELAXED);
}

repo_requests repo_requests_since(const repo_requests *after, const repo_requests *before)
{
    repo_requests d = {after->get - before->get,   after->get_range - before->get_range,
                       after->put - before->put,   after->list - before->list,
                       after->head - before->head, after->del - before->del};
    return d;
}

uint64_t repo_requests_total(const repo_requests *q)
{
    return q->get + q->get_range + q->put + q->list + q->head + q->del;
}

void repo_requests_format(const repo_requests *q, char *out, size_t cap)
{
    snprintf(out, cap,
             "%llu requests (%llu GET, %llu ranged GET, %llu PUT, %llu LIST, %llu HEAD, "
             "%llu DELETE)",
             (unsigned long long)repo_requests_total(q), (unsigned long long)q->get,
             (unsigned long long)q->get_range, (unsigned long long)q->put,
             (unsigned long long)q->list, (unsigned long long)q->head,
             (unsigned long long)q->del);
}

