/* Disk blocks reserved ahead of a segment's end of file (segment.pyx).
 *
 * On ext4 and XFS a buffered write past the allocated extents goes through delayed allocation,
 * which books every new block as it is written; into blocks that fallocate(2) already reserved
 * (unwritten extents) it does not. FALLOC_FL_KEEP_SIZE reserves without changing the file's
 * length, so the .log stays exactly its batches: readers, Kafka's tools and crash recovery never
 * see the reservation, and truncating the file to its own length gives the blocks back.
 *
 * On tmpfs and most other file systems fallocate allocates and zeroes real pages instead, which
 * costs more than it saves: reservations are made only where the file system is one of the two. */
#ifndef SEGLOG_PREALLOC_H
#define SEGLOG_PREALLOC_H
#include <errno.h>

#if defined(__linux__)
#include <fcntl.h>
#include <sys/vfs.h>

#define SEGLOG_EXT4_MAGIC 0xEF53L      /* EXT4_SUPER_MAGIC (ext2/ext3 share it) */
#define SEGLOG_XFS_MAGIC 0x58465342L   /* XFS_SUPER_MAGIC */

/* 1 when `fd` lies on a file system whose fallocate reserves blocks without writing them. */
static inline int seglog_prealloc_useful(int fd) {
    struct statfs s;
    if (fstatfs(fd, &s) != 0)
        return 0;
    return (long)s.f_type == SEGLOG_EXT4_MAGIC || (long)s.f_type == SEGLOG_XFS_MAGIC;
}

/* Reserve [offset, offset + len) without changing the file's size: 0, or an errno. */
static inline int seglog_prealloc(int fd, long offset, long len) {
    return fallocate(fd, FALLOC_FL_KEEP_SIZE, (off_t)offset, (off_t)len) == 0 ? 0 : errno;
}
#else
static inline int seglog_prealloc_useful(int fd) { (void)fd; return 0; }
static inline int seglog_prealloc(int fd, long offset, long len) {
    (void)fd; (void)offset; (void)len; return EOPNOTSUPP;
}
#endif

#endif
