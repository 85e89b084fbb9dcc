# Finds the ZooKeeper C client, multi-threaded flavour (Debian: libzookeeper-mt-dev), and makes
# the imported target ZooKeeper::zookeeper_mt. Included by zkr's build and by its installed
# config (not a Find module: a caller's CMAKE_MODULE_PATH is left alone).
if(NOT TARGET ZooKeeper::zookeeper_mt)
  find_path(ZKR_ZOOKEEPER_INCLUDE_DIR zookeeper/zookeeper.h)
  find_library(ZKR_ZOOKEEPER_LIBRARY zookeeper_mt)
  mark_as_advanced(ZKR_ZOOKEEPER_INCLUDE_DIR ZKR_ZOOKEEPER_LIBRARY)
  if(NOT ZKR_ZOOKEEPER_INCLUDE_DIR OR NOT ZKR_ZOOKEEPER_LIBRARY)
    set(zkr_zookeeper_message
        "zkr needs the ZooKeeper C client (libzookeeper_mt and zookeeper/zookeeper.h; Debian: libzookeeper-mt-dev)")
    if(zkr_FIND_REQUIRED OR NOT DEFINED zkr_FIND_REQUIRED)
      message(FATAL_ERROR "${zkr_zookeeper_message}")
    endif()
    message(WARNING "${zkr_zookeeper_message}")
    set(zkr_FOUND FALSE)
    return()
  endif()
  add_library(ZooKeeper::zookeeper_mt UNKNOWN IMPORTED)
  set_target_properties(ZooKeeper::zookeeper_mt PROPERTIES
    IMPORTED_LOCATION "${ZKR_ZOOKEEPER_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${ZKR_ZOOKEEPER_INCLUDE_DIR}"
    INTERFACE_COMPILE_DEFINITIONS THREADED)
endif()
