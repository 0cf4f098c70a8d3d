/* conf.c: the configuration file (QMPI_CONF), the stacks it lays out, and the tool
 * arguments of its sections. Needs no MPI: loading.c turns its entries into levels. */
#define _GNU_SOURCE
#include "qmpi_runtime.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* QMPI_CONF=FILE lists the stack, one section per tool instance, in chain order:
 *
 *     # comment (a line starting with # or ;)
 *     [outer]                      an instance name: letters, digits, '_', '-', '.'
 *     tool = ./libcounter.so       a path (as in TOOLS), %NAME (static) or @NAME (callback)
 *     output = outer.txt           anything else: an argument of this instance
 *
 * or, with named stacks, which instances each stack holds, in order:
 *
 *     [stack default]              the stack the application's calls enter (required)
 *     instances = switch, plain
 *     [stack heavy]                another stack, entered by a tool's switch
 *     instances = tracer, counter
 *
 * Every instance is in exactly one stack. Values run to the end of the line, trimmed
 * (no inline comments). Keys starting with "qmpi." are reserved for the core; headers
 * of two words other than [stack NAME] too. Every error is "FILE:LINE: ..." and stops
 * the job; it quotes at most 80 bytes of a line, escaped (errors.c). When QMPI_CONF is
 * set, QMPI_TOOLS, TOOLS and QMPI_TOOL_LIST are not read.
 *
 * The file must be a regular file of at most QMPI_CONF_MAX_BYTES: it is opened without
 * blocking (a FIFO would hang every rank), and a read error is an error, never the end
 * of the file. Names are looked up in hash tables: reading is linear in the file. */

/* Room for 100,000 sections of a short name and a tool line; far more than any stack. */
#define QMPI_CONF_MAX_BYTES ((off_t)4 << 20)

/* A [stack NAME] section: its instances, in order (indices into qmpi_conf_instances). */
struct qmpi_conf_stack {
    char *name;
    int line;           /* of its [stack NAME] header */
    int instances_line; /* of its instances = line, 0 if none */
    char **names;       /* as written */
    int *members;       /* indices into qmpi_conf_instances, once the file is read */
    int count;
};

static struct qmpi_stack qmpi_default_stack = {"default", 0, 0};
QMPI_HIDDEN struct qmpi_stack *qmpi_stacks = &qmpi_default_stack;
QMPI_HIDDEN int qmpi_stack_count = 1;

QMPI_HIDDEN const char *qmpi_conf_file; /* QMPI_CONF's value, when it built the chain */
static struct qmpi_conf_instance *qmpi_conf_instances;
static int qmpi_conf_count;
static struct qmpi_conf_stack *qmpi_conf_current_stack; /* the [stack NAME] being read */
static struct qmpi_conf_stack *qmpi_conf_stacks;        /* [stack NAME] sections, in file order */
static int qmpi_conf_stack_count;
QMPI_HIDDEN struct qmpi_conf_instance **qmpi_conf_level; /* by level: its instance, NULL for a stack's top */

static char *qmpi_conf_strdup(const char *text, size_t length)
{
    char *copy = strndup(text, length);
    if (copy == NULL)
        qmpi_fatal("QMPI: out of memory reading the configuration file");
    return copy;
}

static int qmpi_conf_word(const char *text, size_t length)
{
    size_t i;
    if (length == 0)
        return 0;
    for (i = 0; i < length; i++)
        if (!(isalnum((unsigned char)text[i]) || text[i] == '_' || text[i] == '-' || text[i] == '.'))
            return 0;
    return 1;
}

/* Makes room in `*array` of `count` elements of `size` bytes for one more: the capacity
 * is 8, then doubles (full at every power of two from 8), so growing is linear. */
static void qmpi_conf_grow(void *array, int count, size_t size)
{
    void **items = (void **)array;
    if (count == 0 || (count >= 8 && (count & (count - 1)) == 0)) {
        size_t capacity = count == 0 ? 8 : 2 * (size_t)count;
        void *grown;
        if (count >= 1 << 29 || capacity > SIZE_MAX / size)
            qmpi_fatal("QMPI: the configuration file has too many entries");
        grown = realloc(*items, capacity * size);
        if (grown == NULL)
            qmpi_fatal("QMPI: out of memory reading the configuration file");
        *items = grown;
    }
}

/* Names to indices, open addressing: slots hold index + 1, 0 is free. `name_of` gives
 * the name of an index. Grown at half full, so a lookup is constant time. */
struct qmpi_conf_names {
    int *slots;
    size_t capacity; /* a power of two, or 0 */
    size_t used;
};
static struct qmpi_conf_names qmpi_conf_instance_names, qmpi_conf_stack_names;

static size_t qmpi_conf_hash(const char *text, size_t length)
{
    size_t hash = 14695981039346656037u, i; /* FNV-1a */
    for (i = 0; i < length; i++)
        hash = (hash ^ (unsigned char)text[i]) * 1099511628211u;
    return hash;
}

static const char *qmpi_conf_instance_name(int index)
{
    return qmpi_conf_instances[index].name;
}

static const char *qmpi_conf_stack_name(int index)
{
    return qmpi_conf_stacks[index].name;
}

/* The index named by the `length` bytes at `text`, or -1. */
static int qmpi_conf_find(const struct qmpi_conf_names *names, const char *(*name_of)(int), const char *text,
                          size_t length)
{
    size_t i;

    if (names->capacity == 0)
        return -1;
    for (i = qmpi_conf_hash(text, length) & (names->capacity - 1); names->slots[i] != 0;
         i = (i + 1) & (names->capacity - 1)) {
        const char *name = name_of(names->slots[i] - 1);
        if (strncmp(name, text, length) == 0 && name[length] == '\0')
            return names->slots[i] - 1;
    }
    return -1;
}

static void qmpi_conf_place(struct qmpi_conf_names *names, const char *name, int index)
{
    size_t i = qmpi_conf_hash(name, strlen(name)) & (names->capacity - 1);
    while (names->slots[i] != 0)
        i = (i + 1) & (names->capacity - 1);
    names->slots[i] = index + 1;
}

/* Adds `index`, whose name is not in the table yet. */
static void qmpi_conf_add(struct qmpi_conf_names *names, const char *(*name_of)(int), int index)
{
    if (2 * (names->used + 1) > names->capacity) {
        struct qmpi_conf_names grown = {NULL, names->capacity ? 2 * names->capacity : 64, names->used};
        size_t i;

        grown.slots = (int *)qmpi_alloc(grown.capacity, sizeof *grown.slots);
        for (i = 0; i < names->capacity; i++)
            if (names->slots[i] != 0)
                qmpi_conf_place(&grown, name_of(names->slots[i] - 1), names->slots[i] - 1);
        free(names->slots);
        *names = grown;
    }
    qmpi_conf_place(names, name_of(index), index);
    names->used++;
}

/* The value of a stack's instances = line: NAME, NAME, ... (by name; resolved later). */
static void qmpi_conf_stack_members(const char *file, int line, struct qmpi_conf_stack *stack, const char *value)
{
    const char *cursor = value;

    if (stack->instances_line != 0)
        qmpi_fatalf("%s:%d: duplicate key 'instances' in [stack %s] (first at line %d)", file, line, stack->name,
                    stack->instances_line);
    stack->instances_line = line;
    if (*value == '\0')
        qmpi_fatalf("%s:%d: [stack %s] instances = needs instance names: instances = NAME, NAME, ...", file, line,
                    stack->name);
    while (1) {
        const char *end = strchr(cursor, ','), *last;

        if (end == NULL)
            end = cursor + strlen(cursor);
        while (isspace((unsigned char)*cursor))
            cursor++;
        last = end;
        while (last > cursor && isspace((unsigned char)last[-1]))
            last--;
        if (!qmpi_conf_word(cursor, (size_t)(last - cursor)))
            qmpi_fatalf("%s:%d: [stack %s] instances = %.80s: '%.*s' is not an instance name", file, line, stack->name,
                        value, (int)(last - cursor), cursor);
        /* Names resolve once the whole file is read: sections may follow the stack. */
        qmpi_conf_grow(&stack->names, stack->count, sizeof *stack->names);
        stack->names[stack->count] = qmpi_conf_strdup(cursor, (size_t)(last - cursor));
        stack->count++;
        if (*end == '\0')
            return;
        cursor = end + 1;
    }
}

static void qmpi_conf_line(const char *file, int line, char *text, struct qmpi_conf_instance **current)
{
    size_t length = strlen(text);
    char *equals;

    while (length > 0 && isspace((unsigned char)text[length - 1]))
        text[--length] = '\0';
    while (isspace((unsigned char)*text))
        text++, length--;
    if (length == 0 || text[0] == '#' || text[0] == ';')
        return;
    if (text[0] == '[') {
        struct qmpi_conf_instance *instance;
        char *name = text + 1, *end = text + length - 1;
        int i;

        if (*end != ']')
            qmpi_fatalf("%s:%d: a section header ends with ']': '%.80s'", file, line, text);
        while (isspace((unsigned char)*name))
            name++;
        while (end > name && isspace((unsigned char)end[-1]))
            end--;
        if (end - name >= 6 && strncmp(name, "stack", 5) == 0 && isspace((unsigned char)name[5])) {
            struct qmpi_conf_stack *stack;
            char *stack_name = name + 6;

            while (isspace((unsigned char)*stack_name))
                stack_name++;
            if (!qmpi_conf_word(stack_name, (size_t)(end - stack_name)))
                qmpi_fatalf("%s:%d: '%.80s': a stack name is letters, digits, '_', '-' and '.' ([stack heavy])", file,
                            line, text);
            i = qmpi_conf_find(&qmpi_conf_stack_names, qmpi_conf_stack_name, stack_name, (size_t)(end - stack_name));
            if (i >= 0)
                qmpi_fatalf("%s:%d: duplicate stack name '%s' (first at line %d)", file, line, qmpi_conf_stacks[i].name,
                            qmpi_conf_stacks[i].line);
            qmpi_conf_grow(&qmpi_conf_stacks, qmpi_conf_stack_count, sizeof *qmpi_conf_stacks);
            stack = &qmpi_conf_stacks[qmpi_conf_stack_count++];
            memset(stack, 0, sizeof *stack);
            stack->name = qmpi_conf_strdup(stack_name, (size_t)(end - stack_name));
            stack->line = line;
            qmpi_conf_add(&qmpi_conf_stack_names, qmpi_conf_stack_name, qmpi_conf_stack_count - 1);
            qmpi_conf_current_stack = stack;
            *current = NULL;
            return;
        }
        if (!qmpi_conf_word(name, (size_t)(end - name)))
            qmpi_fatalf("%s:%d: '%.80s': an instance name is letters, digits, '_', '-' and '.' ([outer])", file, line,
                        text);
        i = qmpi_conf_find(&qmpi_conf_instance_names, qmpi_conf_instance_name, name, (size_t)(end - name));
        if (i >= 0)
            qmpi_fatalf("%s:%d: duplicate instance name '%s' (first at line %d)", file, line,
                        qmpi_conf_instances[i].name, qmpi_conf_instances[i].line);
        qmpi_conf_grow(&qmpi_conf_instances, qmpi_conf_count, sizeof *qmpi_conf_instances);
        instance = &qmpi_conf_instances[qmpi_conf_count++];
        memset(instance, 0, sizeof *instance);
        instance->name = qmpi_conf_strdup(name, (size_t)(end - name));
        instance->line = line;
        qmpi_conf_add(&qmpi_conf_instance_names, qmpi_conf_instance_name, qmpi_conf_count - 1);
        *current = instance;
        qmpi_conf_current_stack = NULL;
        return;
    }
    equals = strchr(text, '=');
    if (equals == NULL)
        qmpi_fatalf("%s:%d: expected '[NAME]', 'KEY = VALUE', a comment or an empty line, found '%.80s'", file, line,
                    text);
    {
        struct qmpi_conf_instance *instance = *current;
        char *key = text, *key_end = equals, *value = equals + 1;
        struct qmpi_argument *argument;
        int i;

        while (key_end > key && isspace((unsigned char)key_end[-1]))
            key_end--;
        while (isspace((unsigned char)*value))
            value++;
        if (!qmpi_conf_word(key, (size_t)(key_end - key)))
            qmpi_fatalf("%s:%d: '%.*s' is not a key: keys are letters, digits, '_', '-' and '.'", file, line,
                        (int)(key_end - key > 80 ? 80 : key_end - key), key);
        *key_end = '\0';
        if (instance == NULL && qmpi_conf_current_stack != NULL) {
            if (strcmp(key, "instances") != 0)
                qmpi_fatalf("%s:%d: unknown key '%s' in [stack %s]: a stack has one line, instances = NAME, NAME, ...",
                            file, line, key, qmpi_conf_current_stack->name);
            qmpi_conf_stack_members(file, line, qmpi_conf_current_stack, value);
            return;
        }
        if (instance == NULL)
            qmpi_fatalf("%s:%d: '%s = ...' before the first [NAME] section", file, line, key);
        if (strncmp(key, "qmpi.", 5) == 0)
            qmpi_fatalf("%s:%d: unknown key '%s' (keys starting with 'qmpi.' are reserved for the core)", file, line,
                        key);
        if (strcmp(key, "tool") == 0) {
            if (instance->tool != NULL)
                qmpi_fatalf("%s:%d: duplicate key 'tool' in [%s] (first at line %d)", file, line, instance->name,
                            instance->tool_line);
            if (*value == '\0')
                qmpi_fatalf("%s:%d: 'tool =' needs a path, %%NAME or @NAME", file, line);
            if (strchr(value, ':') != NULL)
                qmpi_fatalf("%s:%d: tool '%s': no tool path or name holds ':'", file, line, value);
            instance->tool = qmpi_conf_strdup(value, strlen(value));
            instance->tool_line = line;
            return;
        }
        for (i = 0; i < instance->count; i++)
            if (strcmp(instance->arguments[i].key, key) == 0)
                qmpi_fatalf("%s:%d: duplicate key '%s' in [%s] (first at line %d)", file, line, key, instance->name,
                            instance->arguments[i].line);
        if (instance->count == instance->capacity) {
            int capacity = instance->capacity ? 2 * instance->capacity : 8;
            struct qmpi_argument *grown = realloc(instance->arguments, (size_t)capacity * sizeof *grown);
            if (grown == NULL)
                qmpi_fatal("QMPI: out of memory reading the configuration file");
            instance->arguments = grown;
            instance->capacity = capacity;
        }
        argument = &instance->arguments[instance->count++];
        argument->key = qmpi_conf_strdup(key, strlen(key));
        argument->value = qmpi_conf_strdup(value, strlen(value));
        argument->line = line;
    }
}

/* With [stack NAME] sections: every stack names known instances, each instance is in
 * exactly one stack, and [stack default] exists. Then lays the stacks out as levels:
 * the default stack at 0 (the core's top) and 1.., every other stack after it, in file
 * order, as its top (a core level with no tool: the stack's handle) and its instances.
 * Without stack sections: one default stack of every instance, in file order. */
static void qmpi_conf_resolve_stacks(const char *file)
{
    struct qmpi_conf_stack all = {(char *)"default", 0, 0, NULL, NULL, qmpi_conf_count};
    struct qmpi_conf_stack **order;
    int *in_stack = (int *)qmpi_alloc((size_t)qmpi_conf_count + 1, sizeof *in_stack);
    int stacks = qmpi_conf_stack_count ? qmpi_conf_stack_count : 1, s, k, i, level;

    order = (struct qmpi_conf_stack **)qmpi_alloc((size_t)stacks, sizeof *order);
    if (qmpi_conf_stack_count == 0) {
        all.members = (int *)qmpi_alloc((size_t)qmpi_conf_count + 1, sizeof *all.members);
        for (i = 0; i < qmpi_conf_count; i++)
            all.members[i] = i;
        order[0] = &all;
    }
    for (s = 0; s < qmpi_conf_stack_count; s++) {
        struct qmpi_conf_stack *stack = &qmpi_conf_stacks[s];
        if (stack->instances_line == 0)
            qmpi_fatalf("%s:%d: [stack %s] has no 'instances = NAME, ...' line", file, stack->line, stack->name);
        stack->members = (int *)qmpi_alloc((size_t)stack->count, sizeof *stack->members);
        for (k = 0; k < stack->count; k++) {
            i = qmpi_conf_find(&qmpi_conf_instance_names, qmpi_conf_instance_name, stack->names[k],
                               strlen(stack->names[k]));
            if (i < 0)
                qmpi_fatalf("%s:%d: [stack %s] instances: no section [%s] in the file", file, stack->instances_line,
                            stack->name, stack->names[k]);
            if (in_stack[i] == s + 1)
                qmpi_fatalf("%s:%d: [stack %s] instances: [%s] is listed twice: an instance is at one place in one "
                            "stack (give the tool a second section for a second instance)",
                            file, stack->instances_line, stack->name, stack->names[k]);
            if (in_stack[i])
                qmpi_fatalf("%s:%d: [stack %s] instances: [%s] is already in [stack %s] (line %d): an instance is in "
                            "one stack only (give the tool a second section for a second instance)",
                            file, stack->instances_line, stack->name, stack->names[k],
                            qmpi_conf_stacks[in_stack[i] - 1].name, qmpi_conf_stacks[in_stack[i] - 1].instances_line);
            in_stack[i] = s + 1;
            stack->members[k] = i;
        }
    }
    if (qmpi_conf_stack_count > 0) {
        s = qmpi_conf_find(&qmpi_conf_stack_names, qmpi_conf_stack_name, "default", 7);
        if (s < 0)
            qmpi_fatalf("%s:%d: [stack %s] but no [stack default]: with stack sections, [stack default] lists the "
                        "instances the application's calls enter",
                        file, qmpi_conf_stacks[0].line, qmpi_conf_stacks[0].name);
        order[0] = &qmpi_conf_stacks[s];
        for (i = 0, k = 1; i < qmpi_conf_stack_count; i++)
            if (i != s)
                order[k++] = &qmpi_conf_stacks[i];
        for (i = 0; i < qmpi_conf_count; i++)
            if (!in_stack[i])
                qmpi_fatalf("%s:%d: [%s] is in no stack: name it in the instances = line of a [stack NAME]", file,
                            qmpi_conf_instances[i].line, qmpi_conf_instances[i].name);
    }
    qmpi_stacks = (struct qmpi_stack *)qmpi_alloc((size_t)stacks, sizeof *qmpi_stacks);
    qmpi_conf_level =
        (struct qmpi_conf_instance **)qmpi_alloc((size_t)qmpi_conf_count + (size_t)stacks, sizeof *qmpi_conf_level);
    for (s = 0, level = 0; s < stacks; s++) {
        qmpi_stacks[s].name = qmpi_conf_strdup(order[s]->name, strlen(order[s]->name));
        qmpi_stacks[s].top = level++;
        qmpi_stacks[s].count = order[s]->count;
        for (k = 0; k < order[s]->count; k++)
            qmpi_conf_level[level++] = &qmpi_conf_instances[order[s]->members[k]];
    }
    qmpi_stack_count = stacks;
    if (qmpi_conf_stack_count == 0)
        free(all.members);
    free(order);
    free(in_stack);
}

/* The whole of FILE, NUL-terminated, in *text; its length. Only a regular file, opened
 * without blocking, of at most QMPI_CONF_MAX_BYTES (also if it grows while read). */
static size_t qmpi_conf_slurp(const char *file, char **text)
{
    struct stat status;
    size_t length = 0, capacity;
    char *buffer;
    int fd = open(file, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);

    if (fd < 0)
        qmpi_fatalf("QMPI_CONF=%s: cannot read the configuration file: %s", file, strerror(errno));
    if (fstat(fd, &status) != 0)
        qmpi_fatalf("QMPI_CONF=%s: cannot read the configuration file: %s", file, strerror(errno));
    if (!S_ISREG(status.st_mode))
        qmpi_fatalf("QMPI_CONF=%s: not a regular file (%s): the configuration file must be a regular file", file,
                    qmpi_file_kind(status.st_mode));
    if (status.st_size > QMPI_CONF_MAX_BYTES)
        qmpi_fatalf("QMPI_CONF=%s: %lld bytes, larger than the %d MiB a configuration file may have", file,
                    (long long)status.st_size, (int)(QMPI_CONF_MAX_BYTES >> 20));
    /* st_size may be 0 (/proc) or stale: read to the end, within the bound. The buffer
     * keeps room for one more byte than it holds, so the end is seen when it is full. */
    capacity = (size_t)status.st_size + 1 < 4096 ? 4096 : (size_t)status.st_size + 1;
    buffer = (char *)malloc(capacity);
    while (buffer != NULL) {
        ssize_t got;

        if (length + 1 == capacity) {
            char *grown;
            if (length > (size_t)QMPI_CONF_MAX_BYTES)
                qmpi_fatalf("QMPI_CONF=%s: larger than the %d MiB a configuration file may have", file,
                            (int)(QMPI_CONF_MAX_BYTES >> 20));
            capacity = 2 * capacity < (size_t)QMPI_CONF_MAX_BYTES + 2 ? 2 * capacity : (size_t)QMPI_CONF_MAX_BYTES + 2;
            grown = (char *)realloc(buffer, capacity);
            if (grown == NULL)
                free(buffer);
            buffer = grown;
            continue;
        }
        got = read(fd, buffer + length, capacity - 1 - length);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            qmpi_fatalf("QMPI_CONF=%s: cannot read the configuration file: %s", file, strerror(errno));
        if (got == 0)
            break;
        length += (size_t)got;
    }
    if (buffer == NULL)
        qmpi_fatal("QMPI: out of memory reading the configuration file");
    close(fd);
    buffer[length] = '\0';
    *text = buffer;
    return length;
}

/* Reads FILE into qmpi_conf_instances and lays out the stacks; returns the number of
 * levels below level 0. */
QMPI_HIDDEN int qmpi_conf_read(const char *file)
{
    struct qmpi_conf_instance *current = NULL;
    char *text = NULL, *cursor;
    size_t length = qmpi_conf_slurp(file, &text);
    int line = 0, i;

    for (cursor = text; cursor < text + length;) {
        char *end = memchr(cursor, '\n', (size_t)(text + length - cursor));
        char *next = end != NULL ? end + 1 : text + length;

        line++;
        if (memchr(cursor, '\0', (size_t)(next - cursor)) != NULL)
            qmpi_fatalf("%s:%d: a NUL byte: not a text file", file, line);
        if (end != NULL)
            *end = '\0';
        qmpi_conf_line(file, line, cursor, &current);
        cursor = next;
    }
    free(text);
    for (i = 0; i < qmpi_conf_count; i++)
        if (qmpi_conf_instances[i].tool == NULL)
            qmpi_fatalf("%s:%d: [%s] has no 'tool = ...' line (a path, %%NAME or @NAME)", file,
                        qmpi_conf_instances[i].line, qmpi_conf_instances[i].name);
    qmpi_conf_file = file;
    qmpi_conf_resolve_stacks(file);
    if (qmpi_conf_count == 0 && qmpi_conf_stack_count == 0)
        qmpi_warnf("QMPI_CONF=%s: the file has no [NAME] section: running with no tools", file);
    return qmpi_conf_count + qmpi_stack_count - 1; /* levels below 0: the instances and the other stacks' tops */
}

/* The chain entries of the configuration file, in its order: entry k is level k + 1.
 * Errors about an entry start with "FILE:LINE:" of its tool = line. */
QMPI_HIDDEN void qmpi_conf_entries(struct qmpi_entry *out)
{
    int levels = qmpi_conf_count + qmpi_stack_count - 1, i;

    for (i = 0; i < levels; i++) {
        struct qmpi_conf_instance *instance = qmpi_conf_level[i + 1];
        const char *tool;
        char *where = NULL;

        if (instance == NULL) { /* the top of a named stack: a core level */
            out[i].stack_top = 1;
            out[i].where = "QMPI_CONF";
            out[i].position = i + 1;
            out[i].text = (char *)"libqmpi";
            continue;
        }
        tool = instance->tool;

        if (asprintf(&where, "%s:%d: QMPI_CONF", qmpi_conf_file, instance->tool_line) < 0)
            qmpi_fatal("QMPI: out of memory reading the configuration file");
        instance->where = where; /* kept with the instance, as the entry's text is with its level */
        out[i].callback = tool[0] == '@';
        out[i].where = where;
        out[i].position = i + 1;
        if (out[i].callback && tool[1] == '\0')
            qmpi_fatalf("%s entry %d: '@' needs a callback tool name", where, i + 1);
        out[i].text = qmpi_conf_strdup(tool + out[i].callback, strlen(tool + out[i].callback));
    }
}

/* Tool arguments: QMPI_Get_argument (thesis), QMPI_Get_tool_argument (callback). */
static const struct qmpi_argument *qmpi_find_argument(int level, const char *name, const struct qmpi_conf_instance **of)
{
    int i;

    if (qmpi_conf_file == NULL || level < 1 || level >= qmpi_conf_count + qmpi_stack_count || name == NULL ||
        qmpi_conf_level[level] == NULL)
        return NULL;
    *of = qmpi_conf_level[level];
    for (i = 0; i < (*of)->count; i++)
        if (strcmp((*of)->arguments[i].key, name) == 0)
            return &(*of)->arguments[i];
    return NULL;
}

QMPI_HIDDEN const char *qmpi_get_argument(int level, const char *name)
{
    const struct qmpi_conf_instance *instance = NULL;
    const struct qmpi_argument *argument = qmpi_find_argument(level, name, &instance);
    return argument != NULL ? argument->value : NULL;
}

QMPI_HIDDEN void qmpi_argument_error(int level, const char *name, const char *why)
{
    const struct qmpi_conf_instance *instance = NULL;
    const struct qmpi_argument *argument = qmpi_find_argument(level, name, &instance);

    if (argument != NULL)
        qmpi_fatalf("%s:%d: [%s] %s = %s: %s", qmpi_conf_file, argument->line, instance->name, argument->key,
                    argument->value, why ? why : "invalid");
    qmpi_fatalf("argument '%s' of the tool at level %d: %s", name ? name : "(null)", level, why ? why : "invalid");
}

const char *QMPI_Get_tool_argument(int tool_id, const char *name)
{
    return qmpi_get_argument(tool_id, name);
}

void QMPI_Tool_argument_error(int tool_id, const char *name, const char *why)
{
    qmpi_argument_error(tool_id, name, why);
}
